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
from conch.gateway.records import Caller, RecordNotFound, RecordStore
from conch.gateway.records.conversations import add_conversation_items, conversation_items

KIND = "response"


async def load_head(store: RecordStore, who: Caller, previous_response_id: str | None,
                    conversation_id: str | None) -> list[dict[str, Any]]:
    """The items a request continues. An unknown (or another key's) previous_response_id is OpenAI's 400
    `previous_response_not_found` (the code clients recover on, resending the whole input); an unknown
    conversation is a 404 naming the field."""
    if previous_response_id is not None:
        try:
            record = await store.get(KIND, previous_response_id, who)
        except RecordNotFound as exc:
            raise APIError(400, f"Previous response with id '{previous_response_id}' not found.",
                           param="previous_response_id", code="previous_response_not_found") from exc
        return record["context"] + record["response"]["output"]
    if conversation_id is not None:
        try:
            return await conversation_items(store, conversation_id, who)
        except RecordNotFound as exc:
            raise RecordNotFound("conversation", conversation_id, param="conversation") from exc
    return []


async def save(store: RecordStore, owner: str, response: dict[str, Any], input_items: list[dict[str, Any]],
               context: list[dict[str, Any]]) -> None:
    """The whole record, owned by `owner` and tagged with the response's model (an admin's scope)."""
    await store.put(KIND, response["id"], owner, {"response": response, "input_items": input_items,
                                                  "context": context}, model=response.get("model"))


async def mark_cancelled(store: RecordStore, response_id: str, who: Caller, pending: tuple[str, ...]) -> dict:
    """A pending response set to cancelled, atomically and under its own owner (whoever cancels it); a
    finished one is left as it ended. Returns the record."""
    def cancel(record: dict[str, Any]) -> None:
        if record["response"]["status"] in pending:
            record["response"]["status"] = "cancelled"

    try:
        return await store.update(KIND, response_id, who, cancel)
    except RecordNotFound as exc:
        raise RecordNotFound(KIND, response_id, param="response_id") from exc


async def append_to_conversation(store: RecordStore, who: Caller, conversation_id: str,
                                 items: list[dict[str, Any]]) -> None:
    await add_conversation_items(store, conversation_id, who, items)


async def load(store: RecordStore, response_id: str, who: Caller) -> dict[str, Any]:
    return await _get(store, response_id, who, "response_id")


async def delete(store: RecordStore, response_id: str, who: Caller) -> None:
    try:
        await store.delete(KIND, response_id, who)
    except RecordNotFound as exc:
        raise RecordNotFound(KIND, response_id, param="response_id") from exc


async def _get(store: RecordStore, response_id: str, who: Caller, param: str) -> dict:
    try:
        return await store.get(KIND, response_id, who)
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
