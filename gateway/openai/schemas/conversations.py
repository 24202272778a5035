"""/v1/conversations: the request bodies and the items list's query, with the Responses API's input items
(the shapes the openai SDK and the Agents SDK's OpenAIConversationsSession send).

Items are text-only, as Conch's models are: message content parts are input_text / output_text / refusal
(and a reasoning item's summary_text / reasoning_text); an item type Conch does not know is a 400 naming
`items.N.type`. A message without `type` is an easy input message (`{"role", "content"}`).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Field, Tag, field_validator

from conch.gateway.errors import ParamError
from conch.gateway.wire import WireModel

MAX_ITEMS_PER_REQUEST = 20          # as OpenAI's API (the Agents SDK sends batches of at most 20)


class InputText(WireModel):
    type: Literal["input_text"]
    text: str


class OutputText(WireModel):
    type: Literal["output_text"]
    text: str
    annotations: list[dict[str, Any]] = []
    logprobs: list[dict[str, Any]] | None = None


class Refusal(WireModel):
    type: Literal["refusal"]
    refusal: str


ContentPart = Annotated[Union[InputText, OutputText, Refusal], Field(discriminator="type")]


class MessageItem(WireModel):
    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[ContentPart]
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    phase: Literal["commentary", "final_answer"] | None = None


class FunctionCallItem(WireModel):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class FunctionCallOutputItem(WireModel):
    type: Literal["function_call_output"]
    call_id: str
    output: str | list[InputText]
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class CustomToolCallItem(WireModel):
    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str
    id: str | None = None


class CustomToolCallOutputItem(WireModel):
    type: Literal["custom_tool_call_output"]
    call_id: str
    output: str | list[InputText]
    id: str | None = None


class ReasoningText(WireModel):
    type: Literal["summary_text", "reasoning_text"]
    text: str


class ReasoningItem(WireModel):
    """Another model's reasoning, kept as history (Conch does not render it into prompts)."""
    type: Literal["reasoning"]
    summary: list[ReasoningText] = []
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


_ITEMS = {"message": MessageItem, "function_call": FunctionCallItem, "function_call_output": FunctionCallOutputItem,
          "custom_tool_call": CustomToolCallItem, "custom_tool_call_output": CustomToolCallOutputItem,
          "reasoning": ReasoningItem}


def _item_type(value: Any) -> str | None:
    return value.get("type", "message") if isinstance(value, dict) else getattr(value, "type", None)


def _tag(value: Any) -> str:
    """The union's tag, bracketed: a 400's parameter path leaves out bracketed union branches (gateway/errors.py),
    so an error names `items.0.content`, not `items.0.message.content`."""
    return f"[{_item_type(value)}]"


# A union built at runtime from _ITEMS (pydantic reads it); mypy cannot use it as a type: its uses are ignored
Item = Annotated[Union[tuple(Annotated[model, Tag(f"[{name}]")] for name, model in _ITEMS.items())],  # type: ignore
                 Discriminator(_tag)]


def _known_types(items: Any) -> Any:
    """An item type that does not exist (or that Conch cannot keep) is a 400 naming it, before the union
    would answer with a tag error that names nothing."""
    for index, item in enumerate(items if isinstance(items, list) else ()):
        kind = _item_type(item)
        if isinstance(item, dict) and kind not in _ITEMS:
            raise ParamError(f"items.{index}.type", f"Invalid value for 'items.{index}.type': {kind!r} is not "
                                                    f"an item type Conch stores; expected one of {sorted(_ITEMS)}")
    return items


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
    return [item.model_dump(exclude_unset=True) | {"type": item.type} for item in items]
