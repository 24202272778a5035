"""Conversations as records: `{id, object, created_at, metadata, items}` under kind "conversation".

Items are kept in the Responses API's item shapes, as the Conversations API returns them: every item has an
`id`; a message has `type: "message"`, a `status`, and its content as a list of parts (a string content
becomes one `input_text` part, or `output_text` for the assistant); a call or its output gets a `status`.
Items are oldest first. Every change (items appended or deleted, metadata) is the store's atomic `update`:
with Redis, a compare-and-set on the record as Redis holds it, so two replicas appending at once both land.
Only the owner's key (or an admin of every model: a conversation has no model) reads or changes one.
"""
from __future__ import annotations

import time
import uuid
from typing import Any

from conch.gateway.records.errors import RecordNotFound
from conch.gateway.records.owner import Caller, as_caller
from conch.gateway.records.store import RecordStore

KIND = "conversation"

# Item id prefixes, as OpenAI's (an item type not listed gets "item_").
_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "custom_tool_call": "ctc",
           "custom_tool_call_output": "ctco", "reasoning": "rs", "mcp_list_tools": "mcpl", "mcp_call": "mcp",
           "mcp_approval_request": "mcpr", "mcp_approval_response": "mcpa"}
_HAS_STATUS = ("message", "function_call", "function_call_output", "custom_tool_call")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def stored_item(item: dict) -> dict:
    """An input item as the Conversations API returns it (a copy; the caller's dict is untouched)."""
    item = dict(item)
    kind = item.setdefault("type", "message")      # an easy input message: {"role", "content"}
    if kind == "message":
        item["content"] = _parts(item.get("role", "user"), item.get("content", []))
    if kind in _HAS_STATUS:
        item.setdefault("status", "completed")
    if not item.get("id"):
        item["id"] = new_id(_PREFIX.get(kind, "item"))
    return item


def _parts(role: str, content: str | list) -> list:
    if not isinstance(content, str):
        return [{**p, "annotations": p.get("annotations", [])} if p.get("type") == "output_text" else p
                for p in content]
    if role == "assistant":
        return [{"type": "output_text", "text": content, "annotations": []}]
    return [{"type": "input_text", "text": content}]


def public(record: dict) -> dict:
    """The Conversation object (its items are listed separately)."""
    return {key: record[key] for key in ("id", "object", "created_at", "metadata")}


async def create_conversation(store: RecordStore, who: Caller | str, items: list[dict],
                              metadata: dict | None) -> dict:
    """A new conversation owned by `who`; Forbidden (403) for a key that may use no model."""
    who = as_caller(who)
    who.check_may_store()
    record: dict[str, Any] = {"id": new_id("conv"), "object": "conversation", "created_at": int(time.time()),
                              "metadata": metadata or {}, "items": [stored_item(i) for i in items]}
    await store.put(KIND, record["id"], who.name, record)
    return record


async def read_conversation(store: RecordStore, conversation_id: str, who: Caller | str) -> dict:
    return await store.get(KIND, conversation_id, who)


async def conversation_items(store: RecordStore, conversation_id: str, who: Caller | str) -> list[dict]:
    """The conversation's items, oldest first; RecordNotFound / StoreUnavailable as the store's get."""
    return (await store.get(KIND, conversation_id, who))["items"]


async def add_conversation_items(store: RecordStore, conversation_id: str, who: Caller | str,
                                 items: list[dict]) -> list[dict]:
    """Appends the items (each given an id if it has none), atomically; returns them as stored."""
    added = [stored_item(i) for i in items]
    await store.update(KIND, conversation_id, who, lambda record: record["items"].extend(added))
    return added


async def update_metadata(store: RecordStore, conversation_id: str, who: Caller | str,
                          metadata: dict | None) -> dict:
    return await store.update(KIND, conversation_id, who, lambda record: record.update(metadata=metadata or {}))


async def delete_item(store: RecordStore, conversation_id: str, who: Caller | str, item_id: str) -> dict:
    """Removes one item; returns the conversation. RecordNotFound(param="item_id") for an unknown item."""
    def remove(record: dict) -> None:
        kept = [i for i in record["items"] if i.get("id") != item_id]
        if len(kept) == len(record["items"]):
            raise RecordNotFound("item", item_id, param="item_id")
        record["items"] = kept

    return await store.update(KIND, conversation_id, who, remove)


async def delete_conversation(store: RecordStore, conversation_id: str, who: Caller | str) -> None:
    await store.delete(KIND, conversation_id, who)
