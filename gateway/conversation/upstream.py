"""A conversation for a model served upstream (Capabilities.chat_input): the messages are sent as they are,
not rendered into a prompt. With Capabilities.native_tools the tools, tool_choice and response_format travel
too; otherwise Conch's default tool prompt goes into the messages and Conch's parser reads the calls from the
text, and what needs constrained decoding (tool_choice required or named, an output constraint) is refused:
nothing can constrain a remote model's sampling."""
from __future__ import annotations

from conch.engine import ChatInput, OutputConstraint
from conch.gateway.conversation.tools import ToolPlan
from conch.gateway.conversation.types import Conversation, template_message
from conch.gateway.errors import APIError


def chat_input(conv: Conversation, plan: ToolPlan, constraint: OutputConstraint | None,
               native_tools: bool) -> ChatInput:
    """`constraint` is the conversation's, validated as for any model."""
    param = constraint.param if constraint is not None else None
    if native_tools:
        if param is not None and param != conv.paths.output_format:
            raise _unconstrained(conv, param.split(".")[0])
        return ChatInput(conv.messages, tools=conv.tools, tool_choice=conv.tool_choice,
                         parallel_tool_calls=conv.parallel_tool_calls, response_format=conv.response_format)
    if param is not None:
        raise _unconstrained(conv, param.split(".")[0] if param != conv.paths.output_format else param)
    if plan.grammar is not None:
        raise _unconstrained(conv, conv.paths.tool_choice)
    messages = [template_message(m) for m in conv.messages]
    if plan.format is not None:  # tools, or tool turns: the model's format, as for a local model
        messages = plan.format.prompt(messages, plan.tools)
    return ChatInput(tuple(messages))


def _unconstrained(conv: Conversation, param: str) -> APIError:
    return APIError(400, f"{param} needs constrained decoding, which model '{conv.model}' does not offer: it is "
                         f"served by an upstream server (set supports_tools: true in its config if that server "
                         f"takes tools and response_format itself)", param=param)
