"""The MCP loop's events (agents/mcp/events.py) -> the response's MCP items and their stream events.

    mcp_list_tools   output_item.added, mcp_list_tools.in_progress, .completed | .failed, output_item.done
    mcp_call         output_item.added, mcp_call.in_progress, mcp_call_arguments.delta, .done,
                     mcp_call.completed | .failed, output_item.done
    approval         output_item.added, output_item.done (an mcp_approval_request)

Items go into the response's output list, shared with the model turns' builders, so output indices follow the
order things happened. Invariants: an item is added, then done, once; the arguments' delta concatenates to
their done value; a listing the policy refused (a redirect off the allowed origin) is a 400, never an item.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from conch.agents.mcp.events import (Approval, ApprovalRequested, CallArguments, CallCompleted, CallFailed,
                                     CallInProgress,
                                     ListToolsCompleted, ListToolsFailed, ListToolsInProgress, McpCall, TurnDone)
from conch.agents.mcp.types import FailureKind
from conch.gateway.openai.responses.items import new_item_id
from conch.gateway.openai.responses.mcp_items import approval_request_item, call_error, call_item, list_tools_item
from conch.gateway.openai.responses.mcp_plan import refusal

Events = list[dict[str, Any]]


class McpOutput:
    def __init__(self, items: list[dict[str, Any]], approvals: tuple[Approval, ...],
                 params: Mapping[str, str]) -> None:
        self.items = items
        self._params = params                       # server label -> the request field a refusal names
        self._index: dict[str, int] = {}            # item id -> its index in `items`
        self._lists: dict[str, str] = {}            # server label -> its mcp_list_tools item id
        self._approved = [a.call for a in approvals if a.approve]    # resumed calls, to name their request

    def on(self, event: Any) -> Events:
        return _HANDLERS[type(event)](self, event)

    def _add(self, item: dict[str, Any], kind: str | None) -> Events:
        self._index[item["id"]] = len(self.items)
        self.items.append(item)
        added = [{"type": "response.output_item.added", "output_index": len(self.items) - 1, "item": dict(item)}]
        return added + ([self._event(kind, item["id"])] if kind else [])

    def _event(self, kind: str, item_id: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "item_id": item_id, "output_index": self._index[item_id], **fields}

    def _done(self, item_id: str, kind: str, **changes: Any) -> Events:
        item = self.items[self._index[item_id]]
        item.update(changes)
        return [self._event(kind, item_id),
                {"type": "response.output_item.done", "output_index": self._index[item_id], "item": item}]

    def _list_started(self, event: ListToolsInProgress) -> Events:
        item_id = self._lists[event.server_label] = new_item_id("mcp_list_tools")
        return self._add(list_tools_item(item_id, event.server_label), "response.mcp_list_tools.in_progress")

    def _listed(self, event: ListToolsCompleted) -> Events:
        tools = list_tools_item("", event.server_label, event.tools)["tools"]
        return self._done(self._lists[event.server_label], "response.mcp_list_tools.completed", tools=tools)

    def _list_failed(self, event: ListToolsFailed) -> Events:
        if event.kind is FailureKind.REFUSED:
            raise refusal(self._params.get(event.server_label, "tools"), event.error)
        return self._done(self._lists[event.server_label], "response.mcp_list_tools.failed", error=event.error)

    def _call_started(self, event: CallInProgress) -> Events:
        request = self._approval_of(event.call)
        return self._add(call_item(event.call, "in_progress", approval_request_id=request),
                         "response.mcp_call.in_progress")

    def _approval_of(self, call: McpCall) -> str | None:
        """The approval request a resumed call answers (None for a call that needed no approval)."""
        for k, asked in enumerate(self._approved):
            if (asked.server_label, asked.name, asked.arguments) == (call.server_label, call.name, call.arguments):
                return self._approved.pop(k).id
        return None

    def _arguments(self, event: CallArguments) -> Events:
        item_id, text = event.call.id, event.call.arguments
        self.items[self._index[item_id]]["arguments"] = text
        return [self._event("response.mcp_call_arguments.delta", item_id, delta=text),
                self._event("response.mcp_call_arguments.done", item_id, arguments=text)]

    def _completed(self, event: CallCompleted) -> Events:
        return self._done(event.call.id, "response.mcp_call.completed", output=event.output.text,
                          status="completed")

    def _failed(self, event: CallFailed) -> Events:
        return self._done(event.call.id, "response.mcp_call.failed", error=call_error(event.kind, event.error),
                          status="failed")

    def _approval(self, event: ApprovalRequested) -> Events:
        item = approval_request_item(event.call)
        return self._add(item, None) + [{"type": "response.output_item.done",
                                         "output_index": self._index[item["id"]], "item": item}]


_HANDLERS: dict[type, Callable[[McpOutput, Any], Events]] = {
    ListToolsInProgress: McpOutput._list_started, ListToolsCompleted: McpOutput._listed,
    ListToolsFailed: McpOutput._list_failed, CallInProgress: McpOutput._call_started,
    CallArguments: McpOutput._arguments, CallCompleted: McpOutput._completed, CallFailed: McpOutput._failed,
    ApprovalRequested: McpOutput._approval, TurnDone: lambda self, event: [],
}
