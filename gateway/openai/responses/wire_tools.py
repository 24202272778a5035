"""POST /v1/responses' `tools` and `tool_choice` as typed wire models: a union tagged by `type`, each tool's fields
with their JSON types. What is typed here is read into the Conversation's shapes by tools.py and mcp_tools.py
(names, approval rules, which choice forces what); a hosted tool type (web_search...) or an unknown one is
refused there by name, so here such a tag only needs to be a string."""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Field, Tag

from conch.gateway.openai.schemas.common import WireModel

MAX_TOOLS = 512
Name = Annotated[str, Field(max_length=256)]
Text = Annotated[str, Field(max_length=1 << 20)]


class FunctionTool(WireModel):
    type: Literal["function"]
    name: Name
    description: Text | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class TextFormat(WireModel):
    type: Literal["text"]


class GrammarFormat(WireModel):
    type: Literal["grammar"]
    syntax: Literal["lark", "regex"]
    definition: str


class CustomTool(WireModel):
    type: Literal["custom"]
    name: Name
    description: Text | None = None
    format: Annotated[Union[TextFormat, GrammarFormat], Field(discriminator="type")] | None = None


class McpToolFilter(WireModel):
    tool_names: Annotated[list[Name], Field(max_length=MAX_TOOLS)] | None = None
    read_only: bool | None = None


class McpTool(WireModel):
    type: Literal["mcp"]
    server_label: Name
    server_url: Annotated[str, Field(max_length=8192)] | None = None
    allowed_tools: Annotated[list[Name], Field(max_length=MAX_TOOLS)] | McpToolFilter | None = None
    require_approval: Literal["always", "never"] | dict[str, McpToolFilter] | None = None
    headers: dict[str, str] | None = None
    authorization: str | None = None
    server_description: Text | None = None
    allowed_callers: list[Name] | None = None
    defer_loading: bool | None = None
    connector_id: Name | None = None
    tunnel_id: Name | None = None


class OtherTool(WireModel, extra="allow"):
    """A tool type Conch does not run (hosted, or none at all): read_tools refuses it by name."""
    type: str


_TOOLS = {"function": FunctionTool, "custom": CustomTool, "mcp": McpTool}


def _tool_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return f"[{kind}]" if isinstance(kind, str) and kind in _TOOLS else "[other]"


Tool = Annotated[Union[tuple(Annotated[model, Tag(f"[{name}]")]  # type: ignore
                             for name, model in {**_TOOLS, "other": OtherTool}.items())],
                 Discriminator(_tool_tag)]
Tools = Annotated[list[Tool], Field(max_length=MAX_TOOLS)]  # type: ignore[valid-type]


class NamedChoice(WireModel):
    type: Literal["function", "custom"]
    name: Name


class McpChoice(WireModel):
    type: Literal["mcp"]
    server_label: Name
    name: Name | None = None


class AllowedTool(WireModel, extra="allow"):
    type: Name
    name: Name | None = None


class AllowedToolsChoice(WireModel):
    type: Literal["allowed_tools"]
    mode: Literal["auto", "required"]
    tools: Annotated[list[AllowedTool], Field(max_length=MAX_TOOLS)]


class OtherChoice(WireModel, extra="allow"):
    """A hosted tool's choice (web_search...): read_tools refuses it by name."""
    type: str


_CHOICES = {"function": NamedChoice, "custom": NamedChoice, "mcp": McpChoice, "allowed_tools": AllowedToolsChoice}


def _choice_tag(value: Any) -> str:
    if isinstance(value, str):
        return "[mode]"
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return f"[{kind}]" if isinstance(kind, str) and kind in _CHOICES else "[other]"


ToolChoice = Annotated[Union[
    Annotated[Literal["none", "auto", "required"], Tag("[mode]")], Annotated[NamedChoice, Tag("[function]")],
    Annotated[NamedChoice, Tag("[custom]")], Annotated[McpChoice, Tag("[mcp]")],
    Annotated[AllowedToolsChoice, Tag("[allowed_tools]")], Annotated[OtherChoice, Tag("[other]")]],
    Discriminator(_choice_tag)]


def dumped(value: Any) -> Any:
    """A typed tool or choice as the client sent it (fields it left out stay out), for tools.py and the echo."""
    if isinstance(value, list):
        return [dumped(v) for v in value]
    return value.model_dump(exclude_unset=True, by_alias=True) if isinstance(value, WireModel) else value
