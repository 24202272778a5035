"""The MCP items of a response, as OpenAI's: `mcp_list_tools`, `mcp_call`, `mcp_approval_request` (output) and
`mcp_approval_response` (input), and what the loop reads back from a request's context.

An `mcp_call` in the context is rendered as the assistant's call and its result (agents/mcp/transcript.py);
tool lists and approval requests are not rendered: a tool list is the server's tools for this conversation
(listed once, not again while it is in the context), and the approval responses that end a request's input
answer the approval requests before them (an approval deeper in the history was answered already)."""
from __future__ import annotations

from typing import Any

from conch.agents.mcp import McpTool
from conch.agents.mcp.events import Approval, CallRecord, McpCall
from conch.agents.mcp.transcript import as_messages
from conch.agents.mcp.types import FailureKind
from conch.gateway.errors import APIError

MCP_ID_PREFIX = {"mcp_list_tools": "mcpl", "mcp_call": "mcp", "mcp_approval_request": "mcpr",
                 "mcp_approval_response": "mcpa"}
# A failure's kind -> the JSON-RPC-style code of an `mcp_protocol_error` (a tool's own error is an execution error)
_CODES = {FailureKind.PROTOCOL: -32600, FailureKind.UNREACHABLE: -32000, FailureKind.TIMEOUT: -32001,
          FailureKind.REFUSED: -32002}


# -- output items --

def list_tools_item(item_id: str, label: str, tools: tuple[McpTool, ...] = (), error: str | None = None) -> dict:
    item: dict[str, Any] = {"id": item_id, "type": "mcp_list_tools", "server_label": label,
                            "tools": [_tool(t) for t in tools]}
    if error is not None:
        item["error"] = error
    return item


def _tool(tool: McpTool) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": dict(tool.input_schema),
            "annotations": dict(tool.annotations) if tool.annotations else None}


def call_item(call: McpCall, status: str, *, arguments: str = "", output: str | None = None,
              error: dict[str, Any] | None = None, approval_request_id: str | None = None) -> dict[str, Any]:
    return {"id": call.id, "type": "mcp_call", "server_label": call.server_label, "name": call.name,
            "arguments": arguments, "output": output, "error": error, "status": status,
            "approval_request_id": approval_request_id}


def call_error(kind: FailureKind, message: str) -> dict[str, Any]:
    if kind is FailureKind.TOOL_ERROR:
        return {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": message}]}
    return {"type": "mcp_protocol_error", "code": _CODES.get(kind, -32603), "message": message}


def approval_request_item(call: McpCall) -> dict[str, Any]:
    return {"id": call.id, "type": "mcp_approval_request", "server_label": call.server_label, "name": call.name,
            "arguments": call.arguments}


# -- read back from the context --

def call_messages(item: dict[str, Any]) -> list[dict[str, Any]]:
    """A finished (or failed) mcp_call as chat messages: the assistant's call, then its result."""
    call = McpCall(item["id"], item["server_label"], item["name"], item["arguments"])
    error = item.get("error")
    text = error if isinstance(error, str) or error is None else _error_text(error)
    return as_messages([CallRecord(call, output=item.get("output") or "", error=text)])


def _error_text(error: dict[str, Any]) -> str:
    if isinstance(error.get("message"), str):
        return error["message"]
    content = error.get("content")
    parts = content if isinstance(content, list) else []
    return " ".join(p.get("text", "") for p in parts if isinstance(p, dict)) or "the call failed"


def known_tools(context: list[dict[str, Any]]) -> dict[str, tuple[McpTool, ...]]:
    """The tools each server listed in this conversation (the latest list per label; a failed list is none)."""
    known: dict[str, tuple[McpTool, ...]] = {}
    for item in context:
        if item["type"] == "mcp_list_tools" and not item.get("error") and isinstance(item.get("tools"), list):
            label = item["server_label"]
            known[label] = tuple(McpTool(label, t["name"], t.get("description") or "",
                                         t.get("input_schema") or {"type": "object", "properties": {}},
                                         t.get("annotations"))
                                 for t in item["tools"] if isinstance(t, dict) and isinstance(t.get("name"), str))
    return known


def approvals(context: list[dict[str, Any]], first_new: int) -> tuple[Approval, ...]:
    """The answers to approval requests that end the request's input (those after `first_new` in `context`),
    in order; an answer to a request the context does not hold is a 400 naming it."""
    tail = len(context)
    while tail > first_new and context[tail - 1]["type"] == "mcp_approval_response":
        tail -= 1
    requests = {item["id"]: item for item in context[:tail] if item["type"] == "mcp_approval_request"}
    out = []
    for k in range(tail, len(context)):
        answer = context[k]
        request = requests.get(answer["approval_request_id"])
        if request is None:
            index = k - first_new
            raise APIError(400, f"input[{index}].approval_request_id '{answer['approval_request_id']}' matches no "
                                "mcp_approval_request of this conversation", param=f"input.{index}.approval_request_id")
        call = McpCall(request["id"], request["server_label"], request["name"], request["arguments"])
        out.append(Approval(call, answer["approve"], answer.get("reason")))
    return tuple(out)
