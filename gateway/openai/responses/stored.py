"""A response's record in the store (gateway/records), kind "response":

    {"response": the response object, "input_items": this request's input items (normalized, with ids),
     "context": the items the next turn continues from, oldest first: the head this request continued
     (previous response's context and output, or a conversation's items) and its own input}

so `previous_response_id` needs one read, whatever the chain's length. Instructions are not items: they are
not carried into the next turn (OpenAI's rule). Nothing secret is stored: the echo of the settings holds no
header or key."""
from __future__ import annotations

from typing import Any

from conch.gateway.errors import APIError
from conch.gateway.records import RecordNotFound, RecordStore
from conch.gateway.records.conversations import add_conversation_items, conversation_items

KIND = "response"


async def load_head(store: RecordStore, owner: str, previous_response_id: str | None,
                    conversation_id: str | None) -> list[dict[str, Any]]:
    """The items a request continues. An unknown (or another key's) previous_response_id is OpenAI's 400
    `previous_response_not_found` (the code clients recover on, resending the whole input); an unknown
    conversation is a 404 naming the field."""
    if previous_response_id is not None:
        try:
            record = await store.get(KIND, previous_response_id, owner)
        except RecordNotFound as exc:
            raise APIError(400, f"Previous response with id '{previous_response_id}' not found.",
                           param="previous_response_id", code="previous_response_not_found") from exc
        return record["context"] + record["response"]["output"]
    if conversation_id is not None:
        try:
            return await conversation_items(store, conversation_id, owner)
        except RecordNotFound as exc:
            raise RecordNotFound("conversation", conversation_id, param="conversation") from exc
    return []


async def save(store: RecordStore, owner: str, response: dict[str, Any], input_items: list[dict[str, Any]],
               context: list[dict[str, Any]]) -> None:
    await store.put(KIND, response["id"], owner, {"response": response, "input_items": input_items,
                                                  "context": context})


async def append_to_conversation(store: RecordStore, owner: str, conversation_id: str,
                                 items: list[dict[str, Any]]) -> None:
    await add_conversation_items(store, conversation_id, owner, items)


async def load(store: RecordStore, response_id: str, owner: str, admin: bool = False) -> dict[str, Any]:
    return await _get(store, response_id, owner, "response_id", admin)


async def _get(store: RecordStore, response_id: str, owner: str, param: str, admin: bool = False) -> dict:
    try:
        return await store.get(KIND, response_id, owner, admin=admin)
    except RecordNotFound as exc:
        raise RecordNotFound(KIND, response_id, param=param) from exc


def page(items: list[dict[str, Any]], after: str | None, limit: int, order: str) -> dict[str, Any]:
    """A list page as OpenAI's: `order` desc lists the newest first; `after` is an item id of the last page."""
    ordered = list(reversed(items)) if order == "desc" else list(items)
    if after is not None:
        ids = [item.get("id") for item in ordered]
        if after not in ids:
            raise RecordNotFound("item", after, param="after")
        ordered = ordered[ids.index(after) + 1:]
    data = ordered[:limit]
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": len(ordered) > limit}
