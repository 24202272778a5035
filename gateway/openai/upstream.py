"""A chat request for a model served upstream (Capabilities.chat_input): the validated messages are sent as
they are, not rendered into a prompt. With Capabilities.native_tools the tools, tool_choice and
response_format travel too; otherwise Conch's default tool prompt goes into the messages and Conch's parser
reads the calls from the text, and what needs constrained decoding (tool_choice required or named, an output
constraint) is refused: nothing can constrain a remote model's sampling."""
from __future__ import annotations

from engine import ChatInput
from gateway.errors import APIError
from gateway.openai.schemas.chat import ChatCompletionRequest
from gateway.openai.structured import output_constraint
from gateway.openai.tools import ToolPlan


def chat_input(body: ChatCompletionRequest, plan: ToolPlan, native_tools: bool) -> ChatInput:
    constraint = output_constraint(body)                # validated here as for any model
    param = constraint.param.split(".")[0] if constraint is not None else None   # the top-level field
    if native_tools:
        if constraint is not None and param != "response_format":
            raise _unconstrained(body, param)
        choice = body.tool_choice
        return ChatInput(tuple(m.model_dump(exclude_none=True) for m in body.messages),
                         tools=tuple(t.model_dump(exclude_none=True) for t in body.tools or ()),
                         tool_choice=choice.model_dump() if hasattr(choice, "model_dump") else choice,
                         parallel_tool_calls=body.parallel_tool_calls, response_format=body.response_format)
    if constraint is not None:
        raise _unconstrained(body, param)
    if plan.grammar is not None:
        raise _unconstrained(body, "tool_choice")
    messages = [m.to_template() for m in body.messages]
    if plan.format is not None:  # tools, or tool turns: the model's format, as for a local model
        messages = plan.format.prompt(messages, plan.tools)
    return ChatInput(tuple(messages))


def _unconstrained(body: ChatCompletionRequest, param: str | None) -> APIError:
    return APIError(400, f"{param} needs constrained decoding, which model '{body.model}' does not offer: it is "
                         f"served by an upstream server (set supports_tools: true in its config if that server "
                         f"takes tools and response_format itself)", param=param)
