"""A conversation's tools and tool_choice, checked once and turned into agents' types, the model's tool format
and the grammar that format writes forced calls in."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conch.agents.reasoning import Phase, ReasoningFormat
from conch.agents.tool_choice import ToolChoice
from conch.agents.tool_formats import ToolFormat, ToolFormatError, UnknownToolFormat, get_format
from conch.agents.tools import ToolFunction
from conch.grammars import Grammar, GrammarError, JsonSchema, validate
from conch.gateway.conversation.types import Conversation
from conch.gateway.errors import APIError

_EMPTY_PARAMETERS = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class ToolPlan:
    tools: tuple[ToolFunction, ...]     # what the prompt offers (empty when tool_choice is none)
    choice: ToolChoice
    grammar: Grammar | None             # enforces required / named choices
    format: ToolFormat | None = None    # the model's (tool_call_parser): prompt, grammar and parser agree
    # the model's reasoning format and where its reply starts (None: the reply is all answer)
    reasoning: tuple[ReasoningFormat, Phase] | None = None

    @property
    def parses_calls(self) -> bool:
        return bool(self.tools)


def plan_tools(conv: Conversation, tool_format: str, max_parallel_tool_calls: int) -> ToolPlan:
    """`tool_format` is the model's `tool_call_parser`; `max_parallel_tool_calls` its bound on a required
    choice (1 with parallel_tool_calls false). Checks each tool's schema: call off the event loop."""
    paths = conv.paths
    fmt = _format(tool_format) if conv.tools or conv.has_tool_turns else None
    if not conv.tools:
        if conv.tool_choice is not None and conv.tool_choice != "none":
            raise APIError(400, "tool_choice is set but no tools were given", param=paths.tool_choice)
        return ToolPlan((), ToolChoice("none"), None, fmt)
    tools = tuple(_function(conv, i, t["function"]) for i, t in enumerate(conv.tools))
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise APIError(400, "tool function names must be unique", param=paths.tools)
    choice = _choice(conv, names)
    if choice.mode == "none":  # the tools are not rendered; earlier tool turns still are
        return ToolPlan((), choice, None, fmt if conv.has_tool_turns else None)
    max_calls = 1 if conv.parallel_tool_calls is False else max_parallel_tool_calls
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


def _function(conv: Conversation, index: int, fn: dict[str, Any]) -> ToolFunction:
    parameters = fn.get("parameters")
    parameters = parameters if parameters is not None else _EMPTY_PARAMETERS
    param = conv.paths.tool_schema.format(index=index)
    try:
        validate(JsonSchema.from_dict(parameters))
    except GrammarError as exc:
        raise APIError(400, f"{_bracketed(param)}: {exc.message}", param=param, code="invalid_schema") from exc
    # ToolFunction takes the schema as a mapping too (stored as JSON text); its field is typed str
    return ToolFunction(fn["name"], fn.get("description") or "", parameters)  # type: ignore[arg-type]


def _bracketed(param: str) -> str:
    """tools.0.function.parameters -> tools[0].function.parameters"""
    return ".".join(f"[{p}]" if p.isdigit() else p for p in param.split(".")).replace(".[", "[")


def _choice(conv: Conversation, names: list[str]) -> ToolChoice:
    value = conv.tool_choice or "auto"
    if isinstance(value, str):
        return ToolChoice(value)
    name = value["function"]["name"]
    if name not in names:
        raise APIError(400, f"tool_choice names function '{name}', which is not among the tools {names}",
                       param=conv.paths.tool_choice)
    return ToolChoice("function", name)
