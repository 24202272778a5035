"""MCP calls as the next model turn reads them: chat's shapes (gateway/conversation/types.py), so a face
appends them to its conversation and renders the prompt through the same chat template and tool plan.

    messages = (*conversation.messages, *as_messages(turn_input.records))
    tools = (*function_tools, *as_tools(turn_input.tools))

Each call is an assistant message with one tool call (its id the mcp_call item's id) followed by its tool
message: the output, or the failure stated for the model ("Error: ...").
"""
from __future__ import annotations

from typing import Any, Sequence

from conch.agents.mcp.events import CallRecord
from conch.agents.mcp.types import McpTool


def as_messages(records: Sequence[CallRecord]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for record in records:
        call = record.call
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}]})
        content = record.output if record.error is None else f"Error: {record.error}"
        messages.append({"role": "tool", "tool_call_id": call.id, "content": content or ""})
    return messages


def as_tools(tools: Sequence[McpTool]) -> list[dict[str, Any]]:
    """The offered MCP tools as chat function tools (the grammar of a required tool choice names only these)."""
    return [tool.as_function() for tool in tools]
