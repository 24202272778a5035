"""The Responses API's `{"type": "mcp"}` tool read off the wire into agents.mcp's `McpToolRequest`.

    {"type": "mcp", "server_label", "server_url"?, "allowed_tools"?, "require_approval"?, "headers"?,
     "authorization"?, "server_description"?}

Invariants: a request's `headers` (and `authorization`, sent as a bearer token) live only in the
McpToolRequest and the ServerTarget built from it (both leave them out of repr); the echo of the tools in the
response (and so the record store) never holds them (`public_tool`); a refusal's message names the field and
the rule, never a header.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from conch.agents.mcp import ApprovalRule, McpToolRequest
from conch.gateway.errors import APIError

_LABEL = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_FIELDS = {"type", "server_label", "server_url", "allowed_tools", "require_approval", "headers", "authorization",
           "server_description", "allowed_callers", "defer_loading", "connector_id", "tunnel_id"}
SECRET_FIELDS = ("headers", "authorization")        # used for the call only: never echoed, stored or logged


@dataclass(frozen=True)
class WireMcpTool:
    index: int                      # its place in the request's tools, for the `param` of a 400
    request: McpToolRequest


def read_mcp_tool(i: int, tool: dict[str, Any]) -> WireMcpTool:
    unknown = sorted(set(tool) - _FIELDS)
    if unknown:
        raise _bad(f"tools.{i}.{unknown[0]}", f"tools[{i}]: unknown field(s) {unknown} for an mcp tool")
    for name in ("connector_id", "tunnel_id"):
        if tool.get(name) is not None:
            raise _bad(f"tools.{i}.{name}", f"tools[{i}].{name}: OpenAI's connectors and tunnels are its own; "
                                            "give a server_url (or a server_label the gateway registered)")
    if tool.get("defer_loading"):
        raise _bad(f"tools.{i}.defer_loading", f"tools[{i}].defer_loading is not supported: Conch has no tool "
                                               "search, every allowed tool is listed")
    if tool.get("allowed_callers") not in (None, ["direct"]):
        raise _bad(f"tools.{i}.allowed_callers", f"tools[{i}].allowed_callers: only ['direct'] is supported")
    label = tool.get("server_label")
    if not isinstance(label, str) or not _LABEL.match(label):
        raise _bad(f"tools.{i}.server_label", f"tools[{i}].server_label must be 1-64 letters, digits, '_', '.' "
                                              "or '-'")
    url = tool.get("server_url")
    if url is not None and not isinstance(url, str):
        raise _bad(f"tools.{i}.server_url", f"tools[{i}].server_url must be a string")
    try:
        approval = ApprovalRule.parse(tool.get("require_approval"))
    except ValueError as exc:
        raise _bad(f"tools.{i}.require_approval", f"tools[{i}].{exc}") from None
    return WireMcpTool(i, McpToolRequest(label, url, _allowed(i, tool.get("allowed_tools")), approval,
                                         _headers(i, tool)))


def _allowed(i: int, value: Any) -> frozenset[str] | None:
    if isinstance(value, dict):
        if set(value) - {"tool_names", "read_only"}:
            raise _bad(f"tools.{i}.allowed_tools", f"tools[{i}].allowed_tools: a filter holds tool_names only")
        if value.get("read_only"):
            raise _bad(f"tools.{i}.allowed_tools.read_only", f"tools[{i}].allowed_tools.read_only is not "
                                                             "supported: list the tools by name")
        value = value.get("tool_names")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise _bad(f"tools.{i}.allowed_tools", f"tools[{i}].allowed_tools must be a list of tool names")
    return frozenset(value)


def _headers(i: int, tool: dict[str, Any]) -> dict[str, str]:
    """The headers of this request's sessions with the server (the error messages never quote a value)."""
    headers = tool.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in headers.items()):
        raise _bad(f"tools.{i}.headers", f"tools[{i}].headers must map header names to strings")
    token = tool.get("authorization")
    if token is not None:
        if not isinstance(token, str):
            raise _bad(f"tools.{i}.authorization", f"tools[{i}].authorization must be a string")
        headers = {**headers, "Authorization": f"Bearer {token}"}
    return dict(headers)


def public_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A request's tool as the response echoes it (and the store keeps it): an mcp tool without its secrets."""
    if tool.get("type") != "mcp":
        return tool
    return {k: v for k, v in tool.items() if k not in SECRET_FIELDS}


def _bad(param: str, message: str, code: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)
