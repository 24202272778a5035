"""/v1/conversations: the request bodies and the items list's query, with the Responses API's input items
(the shapes the openai SDK and the Agents SDK's OpenAIConversationsSession send).

Items are text-only, as Conch's models are: message content parts are input_text / output_text / refusal
(and a reasoning item's summary_text / reasoning_text); an item type Conch does not know is a 400 naming
`items.N.type`. A message without `type` is an easy input message (`{"role", "content"}`).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from conch.gateway.errors import ParamError
from conch.gateway.wire import WireModel
from conch.gateway.openai.schemas.items import CONVERSATION_ITEMS, as_dicts, item_union, known_types

MAX_ITEMS_PER_REQUEST = 20          # as OpenAI's API (the Agents SDK sends batches of at most 20)


# A union built at runtime from the item table (pydantic reads it); mypy cannot use it as a type: its uses are ignored
Item = item_union(CONVERSATION_ITEMS)


def _known_types(items: Any) -> Any:
    return known_types("items", items, CONVERSATION_ITEMS, "Conch stores")


class ConversationCreate(WireModel):
    items: Annotated[list[Item], Field(max_length=MAX_ITEMS_PER_REQUEST)] | None = None  # type: ignore[valid-type]
    metadata: dict[str, str] | None = None
    safety_identifier: str | None = None       # accepted (the SDK sends it); Conch keeps no safety records

    @field_validator("items", mode="before")
    @classmethod
    def _types(cls, items: Any) -> Any:
        return _known_types(items)

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, metadata: dict[str, str] | None) -> dict[str, str] | None:
        return check_metadata(metadata)


class ConversationUpdate(WireModel):
    metadata: dict[str, str] | None

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, metadata: dict[str, str] | None) -> dict[str, str] | None:
        return check_metadata(metadata)


class ItemsCreate(WireModel):
    items: Annotated[list[Item], Field(min_length=1, max_length=MAX_ITEMS_PER_REQUEST)]  # type: ignore[valid-type]

    @field_validator("items", mode="before")
    @classmethod
    def _types(cls, items: Any) -> Any:
        return _known_types(items)


class ItemsQuery(WireModel):
    """GET /v1/conversations/{id}/items' query (OpenAI's defaults: 20 items, newest first)."""
    after: str | None = None
    limit: Annotated[int, Field(ge=1, le=100)] = 20
    order: Literal["asc", "desc"] = "desc"
    include: list[str] = []                    # accepted; stored items carry everything Conch has


def check_metadata(metadata: dict[str, str] | None) -> dict[str, str] | None:
    """OpenAI's bounds: at most 16 pairs, keys up to 64 characters, values up to 512."""
    if metadata is None:
        return None
    if len(metadata) > 16:
        raise ParamError("metadata", "Invalid 'metadata': at most 16 key-value pairs")
    for key, value in metadata.items():
        if len(key) > 64 or len(value) > 512:
            raise ParamError("metadata", f"Invalid 'metadata': key {key[:64]!r}: keys are at most 64 characters "
                                         "and values at most 512")
    return metadata


def items_as_dicts(items: list[Any]) -> list[dict]:
    """The items as the client sent them (fields it left out stay out), for the store."""
    return as_dicts(items)
