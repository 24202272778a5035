"""/v1/conversations: OpenAI's Conversations API, as the openai SDK (`client.conversations`) and the Agents
SDK's OpenAIConversationsSession call it.

A conversation is a record of kind "conversation" in the RecordStore (gateway/records), owned by the key that
created it: another key's id answers the same 404 as an id that never existed; an admin key of every model
may read and delete any (a conversation has no model of its own); a key that may use no model creates none.
POST /v1/responses with `conversation` reads and extends the same record (gateway/records/conversations.py).
"""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from conch.gateway.errors import ParamError
from conch.gateway.json_route import JSONBodyRoute
from conch.gateway.openai.schemas.conversations import (ConversationCreate, ConversationUpdate, ItemsCreate, ItemsQuery,
                                                  items_as_dicts)
from conch.gateway.records import RecordNotFound, caller
from conch.gateway.records import conversations as convs
from conch.gateway.state import conch_state

router = APIRouter(route_class=JSONBodyRoute)


@router.post("/v1/conversations")
async def create(request: Request, body: ConversationCreate | None = None) -> dict:
    body = body or ConversationCreate()
    who = caller(request)
    record = await convs.create_conversation(conch_state(request).records, who, items_as_dicts(body.items or []),
                                             body.metadata)
    return convs.public(record)


@router.get("/v1/conversations/{conversation_id}")
async def retrieve(conversation_id: str, request: Request) -> dict:
    who = caller(request)
    return convs.public(await convs.read_conversation(conch_state(request).records, conversation_id, who))


@router.post("/v1/conversations/{conversation_id}")
async def update(conversation_id: str, body: ConversationUpdate, request: Request) -> dict:
    who = caller(request)
    record = await convs.update_metadata(conch_state(request).records, conversation_id, who, body.metadata)
    return convs.public(record)


@router.delete("/v1/conversations/{conversation_id}")
async def delete(conversation_id: str, request: Request) -> dict:
    who = caller(request)
    await convs.delete_conversation(conch_state(request).records, conversation_id, who)
    return {"id": conversation_id, "object": "conversation.deleted", "deleted": True}


@router.get("/v1/conversations/{conversation_id}/items")
async def list_items(conversation_id: str, request: Request) -> dict:
    query = _items_query(request)
    who = caller(request)
    items = await convs.conversation_items(conch_state(request).records, conversation_id, who)
    ordered = items if query.order == "asc" else items[::-1]
    start = 0
    if query.after is not None:
        ids = [i["id"] for i in ordered]
        if query.after not in ids:
            raise ParamError("after", f"Invalid value for 'after': no item '{query.after}' in conversation "
                                      f"'{conversation_id}'")
        start = ids.index(query.after) + 1
    page = ordered[start:start + query.limit]
    return _item_list(page, has_more=start + query.limit < len(ordered))


@router.post("/v1/conversations/{conversation_id}/items")
async def add_items(conversation_id: str, body: ItemsCreate, request: Request) -> dict:
    who = caller(request)
    added = await convs.add_conversation_items(conch_state(request).records, conversation_id, who,
                                               items_as_dicts(body.items))
    return _item_list(added, has_more=False)


@router.get("/v1/conversations/{conversation_id}/items/{item_id}")
async def retrieve_item(conversation_id: str, item_id: str, request: Request) -> dict:
    who = caller(request)
    items = await convs.conversation_items(conch_state(request).records, conversation_id, who)
    for item in items:
        if item["id"] == item_id:
            return item
    raise RecordNotFound("item", item_id, param="item_id")


@router.delete("/v1/conversations/{conversation_id}/items/{item_id}")
async def delete_item(conversation_id: str, item_id: str, request: Request) -> dict:
    who = caller(request)
    return convs.public(await convs.delete_item(conch_state(request).records, conversation_id, who, item_id))


def _items_query(request: Request) -> ItemsQuery:
    """The list's query string (`include` as `include=a&include=b` or `include[]=a`), validated like a body:
    a bad value is a 400 naming it."""
    params = request.query_params
    raw: dict = {k: params[k] for k in ("after", "limit", "order") if k in params}
    include = params.getlist("include") + params.getlist("include[]")
    if include:
        raw["include"] = include
    try:
        return ItemsQuery.model_validate(raw)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None


def _item_list(items: list[dict], has_more: bool) -> dict:
    return {"object": "list", "data": items, "first_id": items[0]["id"] if items else None,
            "last_id": items[-1]["id"] if items else None, "has_more": has_more}
