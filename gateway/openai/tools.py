"""The request's tools and tool_choice, checked once and turned into agents' types, the model's tool format
and the grammar that format writes forced calls in."""
from __future__ import annotations

from dataclasses import dataclass

from agents.tool_choice import ToolChoice
from agents.tool_formats import ToolFormat, ToolFormatError, UnknownToolFormat, get_format
from agents.tools import ToolFunction
from grammars import Grammar, GrammarError, JsonSchema, validate
from gateway.errors import APIError
from gateway.openai.schemas.chat import ChatCompletionRequest

_EMPTY_PARAMETERS = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class ToolPlan:
    tools: tuple[ToolFunction, ...]     # what the prompt offers (empty when tool_choice is none)
    choice: ToolChoice
    grammar: Grammar | None             # enforces required / named choices
    format: ToolFormat | None = None    # the model's (tool_call_parser): prompt, grammar and parser agree

    @property
    def parses_calls(self) -> bool:
        return bool(self.tools)


def plan_tools(body: ChatCompletionRequest, tool_format: str, max_parallel_tool_calls: int) -> ToolPlan:
    """`tool_format` is the model's `tool_call_parser`; `max_parallel_tool_calls` its bound on a required
    choice (1 with parallel_tool_calls false)."""
    _check_tool_messages(body)
    fmt = _format(tool_format) if body.tools or _has_tool_turns(body) else None
    if not body.tools:
        if body.tool_choice is not None and body.tool_choice != "none":
            raise APIError(400, "tool_choice is set but no tools were given", param="tool_choice")
        return ToolPlan((), ToolChoice("none"), None, fmt)
    tools = tuple(_function(i, t.function) for i, t in enumerate(body.tools))
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise APIError(400, "tool function names must be unique", param="tools")
    choice = _choice(body, names)
    if choice.mode == "none":  # the tools are not rendered; earlier tool turns still are
        return ToolPlan((), choice, None, fmt if _has_tool_turns(body) else None)
    max_calls = 1 if body.parallel_tool_calls is False else max_parallel_tool_calls
    try:
        grammar = fmt.grammar(tools, choice, max_calls)  # type: ignore[union-attr]  # set: there are tools
    except ToolFormatError as exc:
        raise APIError(400, exc.message, param=exc.param) from exc
    return ToolPlan(tools, choice, grammar, fmt)


def _format(name: str) -> ToolFormat:
    try:
        return get_format(name)
    except UnknownToolFormat as exc:  # a model config error, not the request's
        raise APIError(500, f"the model's config is invalid: {exc}", param="model") from exc


def _has_tool_turns(body: ChatCompletionRequest) -> bool:
    return any(m.role == "tool" or m.tool_calls for m in body.messages)


def _function(index: int, fn) -> ToolFunction:
    parameters = fn.parameters if fn.parameters is not None else _EMPTY_PARAMETERS
    try:
        validate(JsonSchema.from_dict(parameters))
    except GrammarError as exc:
        raise APIError(400, f"tools[{index}].function.parameters: {exc.message}",
                       param=f"tools.{index}.function.parameters", code="invalid_schema") from exc
    return ToolFunction(fn.name, fn.description or "", parameters)


def _choice(body: ChatCompletionRequest, names: list[str]) -> ToolChoice:
    value = body.tool_choice or "auto"
    if isinstance(value, str):
        return ToolChoice(value)
    name = value.function.name
    if name not in names:
        raise APIError(400, f"tool_choice names function '{name}', which is not among the tools {names}",
                       param="tool_choice")
    return ToolChoice("function", name)


def _check_tool_messages(body: ChatCompletionRequest) -> None:
    seen: set[str] = set()
    for i, message in enumerate(body.messages):
        for call in message.tool_calls or ():
            seen.add(call.id)
        if message.role == "tool":
            if not message.tool_call_id:
                raise APIError(400, f"messages[{i}]: a tool message needs tool_call_id",
                               param=f"messages.{i}.tool_call_id")
            if message.tool_call_id not in seen:
                raise APIError(400, f"messages[{i}]: tool_call_id '{message.tool_call_id}' matches no earlier "
                               "assistant tool call", param=f"messages.{i}.tool_call_id")
