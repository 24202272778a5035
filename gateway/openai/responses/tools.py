"""The Responses API's `tools` and `tool_choice` -> the Conversation's (chat's shapes), one table row per tool
type.

A `custom` tool is offered to the model as a function of one string parameter, `input`; its calls come back as
`custom_tool_call` items holding that string. When the tool choice forces a custom tool (named, or `required`
with that tool alone), the model writes the tool's input itself, and a `grammar` format (Lark or regex syntax)
is the output constraint, enforced by Conch's grammar engine: the whole output is the call's input.

A `namespace` tool (Codex CLI's `multi_agent_v1`) is flattened: each of its function tools is offered under its
own name (a name clash is a 400), and its calls come back as function_call items carrying `namespace`.

Hosted tools (web search, file search, ...) are tools OpenAI runs on its own servers; Conch cannot. The server's
`--hosted-tools` policy says what a request offering one gets: `drop` (the default, so Codex CLI's `web_search`
does not stop it) leaves them out of what the model is offered and names them in `dropped` (the route sends
them back in the `conch-hosted-tools-dropped` header and logs them); `refuse` answers a 400 naming the tool."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from conch.gateway.errors import APIError
from conch.gateway.openai.responses.mcp_tools import WireMcpTool, public_tool, read_mcp_tool

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_FUNCTION_FIELDS = {"type", "name", "description", "parameters", "strict"}
_CUSTOM_FIELDS = {"type", "name", "description", "format"}
_SYNTAXES = {"lark": "grammar", "regex": "regex"}       # a grammar format's syntax -> the constraint's kind
_HOSTED = frozenset({"web_search", "web_search_preview", "file_search", "code_interpreter", "computer",
                     "computer_use", "computer_use_preview", "image_generation", "local_shell", "shell",
                     "apply_patch"})
_INPUT_SCHEMA = {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}


@dataclass(frozen=True)
class CustomTool:
    name: str
    index: int                      # its place in the request's tools
    format: dict[str, Any] | None   # {"type": "text"} | {"type": "grammar", "syntax", "definition"} | None

    def constraint(self) -> tuple[tuple[str, str, Any], ...]:
        """The output constraint when this tool is forced: its grammar, or none for free text."""
        if not self.format or self.format.get("type") != "grammar":
            return ()
        return ((f"tools.{self.index}.format.definition", _SYNTAXES[self.format["syntax"]],
                 self.format["definition"]),)


@dataclass(frozen=True)
class ResponseTools:
    tools: tuple[dict[str, Any], ...]                 # chat's shapes, as offered to the model
    tool_choice: str | dict[str, Any] | None          # chat's shape
    custom: dict[str, CustomTool]                     # the custom tools by name: their calls are custom items
    forced_custom: CustomTool | None = None           # the whole output is this tool's input
    mcp: tuple[WireMcpTool, ...] = ()                 # MCP servers: their tools are offered per model turn
    namespaces: dict[str, str] = field(default_factory=dict)    # a namespaced function's name -> its namespace
    dropped: tuple[str, ...] = ()                     # hosted tool types left out under the drop policy

    @property
    def constraints(self) -> tuple[tuple[str, str, Any], ...]:
        return self.forced_custom.constraint() if self.forced_custom is not None else ()


@dataclass
class _Read:
    """The tools read so far: chat's function shapes, the custom tools by name, the MCP servers."""

    chat: list[dict[str, Any]] = field(default_factory=list)
    custom: dict[str, CustomTool] = field(default_factory=dict)
    mcp: list[WireMcpTool] = field(default_factory=list)
    namespaces: dict[str, str] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    drop_hosted: bool = True


HOSTED_POLICIES = ("drop", "refuse")


def read_tools(tools: list[dict[str, Any]] | None, tool_choice: str | dict[str, Any] | None,
               hosted: str = "drop") -> ResponseTools:
    """`hosted`: the server's policy for hosted tools (HOSTED_POLICIES)."""
    read = _Read(drop_hosted=hosted == "drop")
    for i, tool in enumerate(tools or ()):
        _read_one(i, tool, read)
    chat_tools, custom = read.chat, read.custom
    choice, allowed = _choice(tool_choice, custom)
    if allowed is not None:
        chat_tools = [t for t in chat_tools if t["function"]["name"] in allowed]
    forced = _forced_custom(choice, chat_tools, custom, bool(read.mcp))
    if forced is not None:   # the model writes the input itself; the tools stay in the prompt as its context
        choice = "auto"
    return ResponseTools(tuple(chat_tools), choice, custom, forced, tuple(read.mcp), read.namespaces,
                         tuple(read.dropped))


def _read_one(i: int, tool: dict[str, Any], read: _Read) -> None:
    kind = tool.get("type")
    reader = _READERS.get(kind) if isinstance(kind, str) else None
    if reader is not None:
        reader(i, tool, read)
    elif read.drop_hosted and _hosted_base(kind) in _HOSTED:
        read.dropped.append(str(kind))
    else:
        raise _refused(i, kind)


def _function(i: int, tool: dict[str, Any], read: _Read) -> None:
    _check_fields(i, tool, _FUNCTION_FIELDS)
    fn = {"name": _name(i, tool), "description": tool.get("description"), "parameters": tool.get("parameters"),
          "strict": tool.get("strict")}
    read.chat.append({"type": "function", "function": {k: v for k, v in fn.items() if v is not None}})


def _custom(i: int, tool: dict[str, Any], read: _Read) -> None:
    _check_fields(i, tool, _CUSTOM_FIELDS)
    name, fmt = _name(i, tool), tool.get("format")
    if fmt is not None and fmt.get("type") != "text":
        if fmt.get("type") != "grammar" or fmt.get("syntax") not in _SYNTAXES:
            raise APIError(400, f"tools[{i}].format must be {{'type': 'text'}} or {{'type': 'grammar', 'syntax': "
                                f"'lark' | 'regex', 'definition'}}", param=f"tools.{i}.format")
        if not isinstance(fmt.get("definition"), str):
            raise APIError(400, f"tools[{i}].format.definition must be a string",
                           param=f"tools.{i}.format.definition")
    read.custom[name] = CustomTool(name, i, fmt)
    fn = {"name": name, "description": tool.get("description") or "", "parameters": _INPUT_SCHEMA}
    read.chat.append({"type": "function", "function": fn})


def _mcp(i: int, tool: dict[str, Any], read: _Read) -> None:
    read.mcp.append(read_mcp_tool(i, tool))


def _namespace(i: int, tool: dict[str, Any], read: _Read) -> None:
    _check_fields(i, tool, {"type", "name", "description", "tools"})
    namespace, inner = _name(i, tool), tool.get("tools")
    if not isinstance(inner, list) or not all(isinstance(t, dict) and t.get("type") == "function" for t in inner):
        raise APIError(400, f"tools[{i}].tools must be a list of function tools", param=f"tools.{i}.tools")
    for j, function in enumerate(inner):
        taken = {t["function"]["name"] for t in read.chat}
        before = len(read.chat)
        try:
            _function(j, function, read)
        except APIError as exc:
            raise APIError(400, f"tools[{i}].{exc.message}", param=f"tools.{i}.{exc.param}") from exc
        name = read.chat[before]["function"]["name"]
        if name in taken:
            raise APIError(400, f"tools[{i}].tools[{j}]: '{name}' is already a tool's name; a namespace's functions "
                                "are offered under their own names", param=f"tools.{i}.tools.{j}.name")
        read.namespaces[name] = namespace


_READERS: dict[str, Callable[[int, dict[str, Any], _Read], None]] = {
    "function": _function, "custom": _custom, "mcp": _mcp, "namespace": _namespace,
}


def _hosted_base(kind: Any) -> Any:
    return re.sub(r"_\d{4}_\d{2}_\d{2}$", "", kind) if isinstance(kind, str) else kind


def _refused(i: int, kind: Any) -> APIError:
    if _hosted_base(kind) in _HOSTED:
        return APIError(400, f"tools[{i}].type '{kind}' is a hosted tool that OpenAI runs on its own servers; "
                             f"Conch cannot run it (offer a function tool instead; this server's --hosted-tools "
                             f"policy is refuse)", param=f"tools.{i}.type")
    return APIError(400, f"tools[{i}].type {kind!r} is not a tool type; supported: function, custom, mcp, namespace",
                    param=f"tools.{i}.type")


def echo_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A request's tool as the response echoes it: a function tool with OpenAI's default `strict` (true) when
    the request left it out (Conch's grammar enforces a call's schema when the call is forced, whatever strict
    says), an mcp tool without its secrets."""
    if tool.get("type") == "function" and tool.get("strict") is None:
        return {**tool, "strict": True}
    return public_tool(tool)


def _check_fields(i: int, tool: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(tool) - allowed)
    if unknown:
        raise APIError(400, f"tools[{i}]: unknown field(s) {unknown}", param=f"tools.{i}.{unknown[0]}")


def _name(i: int, tool: dict[str, Any]) -> str:
    name = tool.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise APIError(400, f"tools[{i}].name must be 1-64 letters, digits, '_', '.' or '-'",
                       param=f"tools.{i}.name")
    return name


def _choice(value: str | dict[str, Any] | None,
            custom: dict[str, CustomTool]) -> tuple[str | dict[str, Any] | None, set[str] | None]:
    """(chat's tool_choice, the names allowed_tools keeps or None)."""
    if value is None or isinstance(value, str) and value in ("none", "auto", "required"):
        return value, None
    if not isinstance(value, dict):
        raise APIError(400, f"tool_choice must be none, auto, required or an object, not {value!r}",
                       param="tool_choice")
    kind = value.get("type")
    if kind in ("function", "custom") and isinstance(value.get("name"), str):
        return {"type": "function", "function": {"name": value["name"]}}, None
    if kind == "allowed_tools" and value.get("mode") in ("auto", "required"):
        names = {t.get("name") for t in value.get("tools") or () if isinstance(t, dict)}
        return value["mode"], {n for n in names if isinstance(n, str)}
    if kind == "mcp" and isinstance(value.get("server_label"), str):   # a name: that tool; none: any tool
        name = value.get("name")
        return ({"type": "function", "function": {"name": name}} if isinstance(name, str) else "required"), None
    if kind in _HOSTED:
        raise APIError(400, f"tool_choice names a '{kind}' tool, which Conch cannot run", param="tool_choice")
    raise APIError(400, "tool_choice must be none, auto, required, {'type': 'function' | 'custom', 'name'}, "
                        "{'type': 'mcp', 'server_label', 'name'?} or {'type': 'allowed_tools', 'mode': 'auto' | "
                        "'required', 'tools'}", param="tool_choice")


def _forced_custom(choice: str | dict[str, Any] | None, tools: list[dict[str, Any]],
                   custom: dict[str, CustomTool], with_mcp: bool) -> CustomTool | None:
    if isinstance(choice, dict):
        return custom.get(choice["function"]["name"])
    if choice == "required" and len(tools) == 1 and not with_mcp:     # MCP tools are offered beside it
        return custom.get(tools[0]["function"]["name"])
    return None
