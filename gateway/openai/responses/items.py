"""Input items -> the stored item list and the Conversation's chat messages.

Items are the Responses API's shapes (message, function_call, function_call_output, custom_tool_call and its
output, reasoning, compaction (compact.py), and the MCP items of mcp_items.py), typed once at the edge
(gateway/openai/schemas/items.py: an unknown type or field, or a value of the wrong type, is a 400 naming its
path there). Stored items are normalized: every item has an id and a type, and a message's content is a list of
parts. Chat messages are OpenAI chat's
shapes (gateway/conversation/types.py)."""
from __future__ import annotations

import json
import uuid
from typing import Any

from conch.gateway.conversation.sealed import SealError, unseal as unseal_reasoning
from conch.gateway.errors import APIError
from conch.gateway.openai.responses.mcp_items import MCP_ID_PREFIX, call_messages
from conch.gateway.sealed import Unsealable, unseal

COMPACTION_KIND = "responses.compaction"     # compact.py seals its summaries under this kind
SUMMARY_PREFIX = "Summary of the conversation so far:\n"

_TEXT_PARTS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}   # part type -> its text key
_ID_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "custom_tool_call": "ctc",
              "custom_tool_call_output": "ctco", "reasoning": "rs", "compaction": "cmp", **MCP_ID_PREFIX}


def new_item_id(kind: str) -> str:
    return f"{_ID_PREFIX.get(kind, 'item')}_{uuid.uuid4().hex}"


def read_input(value: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request's input as normalized items (a string is one user message). The items were typed at the edge
    (gateway/openai/schemas/items.py: every type, field and value checked there); what is left is to fill in
    ids, a message's parts and status, and to open a compaction item's summary."""
    if isinstance(value, str):
        value = [{"type": "message", "role": "user", "content": value}]
    return [_normalized(i, item) for i, item in enumerate(value)]


def _normalized(index: int, item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("type", "message")
    out = {**item, "type": kind, "id": item.get("id") or new_item_id(kind)}
    if kind == "message":
        return _message(out)
    if kind == "compaction":
        _summary(index, out)                     # a 400 for a summary this deployment did not seal
    return out


def _message(item: dict[str, Any]) -> dict[str, Any]:
    content = item["content"]
    if isinstance(content, str):
        part = "output_text" if item["role"] == "assistant" else "input_text"
        content = [{"type": part, "text": content, **({"annotations": []} if part == "output_text" else {})}]
    return {**item, "content": content, "status": item.get("status") or "completed"}


def _summary(index: int, item: dict[str, Any]) -> str:
    """A compaction item's summary (compact.py sealed it); a 400 naming the field for one Conch did not seal."""
    try:
        return unseal(COMPACTION_KIND, item.get("encrypted_content") or "")
    except Unsealable as exc:
        raise _bad(f"input.{index}.encrypted_content", f"input[{index}].encrypted_content: {exc} (a compaction "
                                                       "item is read back only where it was made)") from exc


def to_messages(items: list[dict[str, Any]], first_new: int = 0,
                images: list[str] | None = None) -> list[dict[str, Any]]:
    """Chat messages of normalized items; `first_new` is the index of the request's first input item (the
    items before it are a stored head, already checked), so a 400 names the request's own path. A tool
    output must follow its call: a call_id that matches no earlier call is a 400. `images` gets each
    input_image's path, in prompt order (a stored head's as `previous_response_id`)."""
    messages: list[dict[str, Any]] = []
    calls: set[str] = set()
    seen: list[str] = images if images is not None else []
    for i, item in enumerate(items):
        kind = item["type"]
        where = f"input.{i - first_new}" if i >= first_new else "previous_response_id"
        if kind == "message":
            _add_message(messages, item["role"], _content(item["content"], f"{where}.content", seen))
        elif kind == "reasoning":
            thought = reasoning_text(item)
            if thought:
                messages.append({"role": "assistant", "content": None, "reasoning_content": thought})
        elif kind in ("function_call", "custom_tool_call"):
            calls.add(item["call_id"])
            _attach_call(messages, _chat_call(item))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            if item["call_id"] not in calls:
                index = i - first_new
                raise _bad(f"input.{index}.call_id", f"input[{index}].call_id '{item['call_id']}' matches no "
                                                     f"earlier function_call or custom_tool_call")
            output = item["output"]
            messages.append({"role": "tool", "tool_call_id": item["call_id"],
                             "content": output if isinstance(output, str) else _content(output, f"{where}.output",
                                                                                          seen)})
        elif kind == "mcp_call":
            messages += call_messages(item)
        elif kind == "compaction":
            messages.append({"role": "user", "content": SUMMARY_PREFIX + _summary(i - first_new, item)})
    # reasoning items are the next assistant turn's reasoning_content; MCP tool lists and approvals are not
    # rendered (the loop reads them: gateway/openai/responses/mcp_items.py); reasoning no turn followed is dropped
    return [m for m in messages if m["content"] is not None or m.get("tool_calls") or m["role"] != "assistant"]


def reasoning_text(item: dict[str, Any]) -> str:
    """A reasoning item's text: its encrypted_content if this deployment sealed it, else its reasoning_text
    content (a stored or echoed item); a summary is not the reasoning, and a blob another deployment wrote
    (or a changed one) is dropped: not rendered."""
    blob = item.get("encrypted_content")
    if isinstance(blob, str) and blob:
        try:
            return unseal_reasoning(blob)
        except SealError:
            return ""
    parts = item.get("content")
    return "".join(p.get("text") or "" for p in parts if isinstance(p, dict)) if isinstance(parts, list) else ""


def _content(parts: list[dict[str, Any]], path: str, images: list[str]) -> str | list[dict[str, Any]]:
    """The parts' text; with an input_image among them, chat's parts (text and image_url) in their order."""
    if not any(part.get("type") == "input_image" for part in parts):
        return text_of(parts)
    out: list[dict[str, Any]] = []
    for k, part in enumerate(parts):
        if part.get("type") == "input_image":
            if not part.get("image_url"):
                field = "file_id" if part.get("file_id") else "image_url"
                raise _bad(f"{path}.{k}.{field}", f"{path}.{k}: an input_image needs an image_url (a data URL or an "
                                                  f"allow-listed http(s) URL); Conch has no Files API to read a "
                                                  f"file_id from")
            images.append(path if path == "previous_response_id" else f"{path}.{k}")
            out.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        else:
            out.append({"type": "text", "text": text_of([part])})
    return out


def _add_message(messages: list[dict[str, Any]], role: str, text: str | list[dict[str, Any]]) -> None:
    """An assistant message right after its reasoning joins it (one turn)."""
    last = messages[-1] if messages else None
    if role == "assistant" and last is not None and last["role"] == "assistant" and last["content"] is None \
            and not last.get("tool_calls"):
        last["content"] = text
    else:
        messages.append({"role": role, "content": text})


def _chat_call(item: dict[str, Any]) -> dict[str, Any]:
    """A custom tool is offered to the model as a function of one string, `input` (tools.py)."""
    arguments = item["arguments"] if item["type"] == "function_call" else json.dumps({"input": item["input"]})
    return {"id": item["call_id"], "type": "function", "function": {"name": item["name"], "arguments": arguments}}


def _attach_call(messages: list[dict[str, Any]], call: dict[str, Any]) -> None:
    """Calls that follow an assistant message (its reasoning, or each other) are that message's: one turn of
    parallel calls."""
    if messages and messages[-1]["role"] == "assistant":
        messages[-1].setdefault("tool_calls", []).append(call)
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def text_of(parts: list[dict[str, Any]]) -> str:
    return "".join(part.get(_TEXT_PARTS.get(part.get("type", ""), "text")) or "" for part in parts)


def _bad(param: str, message: str) -> APIError:
    return APIError(400, message, param=param)
