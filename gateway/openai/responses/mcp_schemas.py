"""The input schemas an MCP server lists, checked before a model turn offers its tools.

A schema the grammar compiler refuses (look-around in a pattern, an unknown keyword, a `$ref` that never ends)
is found when the tools are listed; one that compiles but cannot be served (its only value a special token's
text, which no generation writes) by the compiler's probe, when a turn forces the tool (named, or `required`)
and its grammar compiles. Either is a 400 naming the tool, its server and the mcp tool's field (`param`),
before any generation: never a 500, never a failed response. The request is refused whole, as one with a
client's own tool of such a schema is: the client leaves the tool out with `allowed_tools` (a tool dropped in
silence would leave the model other tools than the ones the client asked for). A tool offered among others
under `required` whose branch the probe does not walk shows only if the model takes it: the response ends
`failed` (gateway/openai/responses/mcp_run.py), never a 500.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from conch.agents.mcp import McpTool
from conch.gateway.errors import APIError
from conch.grammars import GrammarError, JsonSchema, validate

CODE = "invalid_mcp_tool_schema"


def check_listed(tools: Sequence[McpTool], params: Mapping[str, str]) -> None:
    """A 400 for the first tool whose input schema the grammar compiler refuses. `params`: server label -> the
    field of the request's mcp tool that names that server."""
    for tool in tools:
        try:
            validate(JsonSchema.from_dict(dict(tool.input_schema)))
        except GrammarError as exc:
            raise unservable(tool, params, exc.message) from None


def forced_refusal(exc: GrammarError, forced: Sequence[McpTool], params: Mapping[str, str]) -> APIError | None:
    """The 400 naming the forced MCP tool(s) whose grammar did not compile (None when the turn forced none: the
    refusal is then the request's own, as the engine said it)."""
    if not forced:
        return None
    return unservable(forced[0], params, exc.message, others=[t.name for t in forced[1:]])


def unservable(tool: McpTool, params: Mapping[str, str], reason: str, others: Sequence[str] = ()) -> APIError:
    param = params.get(tool.server_label, "tools")
    names = ", ".join(f"'{name}'" for name in (tool.name, *others))
    which = f"tool {names}, whose input schema" if not others else f"the tools {names}, one of whose input schemas"
    return APIError(400, f"{_bracketed(param)}: MCP server '{tool.server_label}' lists {which} cannot be served as "
                         f"a grammar: {reason} (leave it out with allowed_tools)", param=param, code=CODE)


def _bracketed(param: str) -> str:
    """tools.0.server_url -> tools[0].server_url"""
    return param.replace(".", "[", 1).replace(".", "].", 1) if param.count(".") >= 2 else param
