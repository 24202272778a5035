"""The Responses API's items as typed wire models, shared by /v1/responses' `input` and /v1/conversations' items.

Every item type is a model with its fields' JSON types, bounded ids and a closed `status`; the union is tagged
by `type` (a message may leave it out). A tag that is not a string, or names no item type, is a 400 naming
`<field>.N.type` (`known_types`) before the union would answer with a tag error that names nothing. Text is
bounded by the body limit only; ids, names and statuses have their own bounds.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Field, Tag

from conch.gateway.errors import ParamError
from conch.gateway.wire import WireModel

MAX_ID = 256                        # an item id, call id or approval id (OpenAI's are under 64 characters)
Id = Annotated[str, Field(min_length=1, max_length=MAX_ID)]
Name = Annotated[str, Field(min_length=1, max_length=MAX_ID)]
Status = Literal["in_progress", "completed", "incomplete"]


class InputText(WireModel):
    type: Literal["input_text"]
    text: str


class OutputText(WireModel):
    type: Literal["output_text"]
    text: str
    annotations: Annotated[list[dict[str, Any]], Field(max_length=1024)] = []
    logprobs: Annotated[list[dict[str, Any]], Field(max_length=1 << 16)] | None = None


class Refusal(WireModel):
    type: Literal["refusal"]
    refusal: str


class InputImage(WireModel):
    """An image by URL (a data URL, or one the gateway may fetch: gateway/conversation/images.py); `file_id`
    parses so the refusal can name it (Conch has no Files API)."""

    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: Literal["auto", "low", "high", "original"] | None = None


ContentPart = Annotated[Union[InputText, OutputText, Refusal, InputImage], Field(discriminator="type")]
Parts = Annotated[list[ContentPart], Field(max_length=1024)]
Outputs = Annotated[list[Annotated[Union[InputText, InputImage], Field(discriminator="type")]],
                    Field(max_length=1024)]


class MessageItem(WireModel):
    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: str | Parts
    id: Id | None = None
    status: Status | None = None
    phase: Literal["commentary", "final_answer"] | None = None


class FunctionCallItem(WireModel):
    type: Literal["function_call"]
    call_id: Id
    name: Name
    arguments: str
    id: Id | None = None
    status: Status | None = None
    namespace: Name | None = None


class FunctionCallOutputItem(WireModel):
    type: Literal["function_call_output"]
    call_id: Id
    output: str | Outputs
    id: Id | None = None
    status: Status | None = None


class CustomToolCallItem(WireModel):
    type: Literal["custom_tool_call"]
    call_id: Id
    name: Name
    input: str
    id: Id | None = None
    namespace: Name | None = None


class CustomToolCallOutputItem(WireModel):
    type: Literal["custom_tool_call_output"]
    call_id: Id
    output: str | Outputs
    id: Id | None = None


class ReasoningText(WireModel):
    type: Literal["summary_text", "reasoning_text"]
    text: str


class ReasoningItem(WireModel):
    """Another model's reasoning, kept as history (Conch does not render it into prompts)."""
    type: Literal["reasoning"]
    summary: Annotated[list[ReasoningText], Field(max_length=1024)] = []
    content: Annotated[list[ReasoningText], Field(max_length=1024)] | None = None
    encrypted_content: str | None = None
    id: Id | None = None
    status: Status | None = None


class McpListedTool(WireModel):
    name: Name
    description: str | None = None
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None = None


class McpListToolsItem(WireModel):
    type: Literal["mcp_list_tools"]
    server_label: Name
    tools: Annotated[list[McpListedTool], Field(max_length=4096)] = []
    error: str | dict[str, Any] | None = None
    id: Id | None = None


class McpCallItem(WireModel):
    type: Literal["mcp_call"]
    server_label: Name
    name: Name
    arguments: str
    output: str | None = None
    error: str | dict[str, Any] | None = None
    status: Literal["in_progress", "completed", "incomplete", "calling", "failed"] | None = None
    approval_request_id: Id | None = None
    id: Id | None = None


class McpApprovalRequestItem(WireModel):
    type: Literal["mcp_approval_request"]
    server_label: Name
    name: Name
    arguments: str
    id: Id | None = None


class McpApprovalResponseItem(WireModel):
    type: Literal["mcp_approval_response"]
    approval_request_id: Id
    approve: bool
    reason: str | None = None
    id: Id | None = None


class CompactionItem(WireModel):
    """What POST /v1/responses/compact returned: a summary only this deployment can open (gateway/sealed.py)."""
    type: Literal["compaction"]
    encrypted_content: Annotated[str, Field(max_length=4 * 2**20)]
    created_by: str | None = None
    id: Id | None = None


CONVERSATION_ITEMS: dict[str, type[WireModel]] = {
    "message": MessageItem, "function_call": FunctionCallItem, "function_call_output": FunctionCallOutputItem,
    "custom_tool_call": CustomToolCallItem, "custom_tool_call_output": CustomToolCallOutputItem,
    "reasoning": ReasoningItem}
RESPONSE_ITEMS: dict[str, type[WireModel]] = {
    **CONVERSATION_ITEMS, "mcp_list_tools": McpListToolsItem, "mcp_call": McpCallItem,
    "mcp_approval_request": McpApprovalRequestItem, "mcp_approval_response": McpApprovalResponseItem,
    "compaction": CompactionItem}


def item_type(value: Any) -> Any:
    """An item's `type` (a message may leave it out)."""
    return value.get("type", "message") if isinstance(value, dict) else getattr(value, "type", None)


def _tag(value: Any) -> str:
    """The union's tag, bracketed: a 400's parameter path leaves out bracketed union branches (gateway/errors.py),
    so an error names `items.0.content`, not `items.0.message.content`."""
    return f"[{item_type(value)}]"


def item_union(table: dict[str, type[WireModel]]) -> Any:
    """The tagged union of `table`'s item models (built at runtime: mypy cannot use it as a type)."""
    return Annotated[Union[tuple(Annotated[model, Tag(f"[{name}]")] for name, model in table.items())],
                     Discriminator(_tag)]


def known_types(field: str, items: Any, table: dict[str, type[WireModel]], what: str) -> Any:
    """A 400 naming `<field>.N.type` for an item whose type is not a string naming an item type of `table`."""
    for index, item in enumerate(items if isinstance(items, list) else ()):
        kind = item_type(item)
        if isinstance(item, dict) and (not isinstance(kind, str) or kind not in table):
            raise ParamError(f"{field}.{index}.type", f"Invalid value for '{field}.{index}.type': {kind!r} is not "
                                                      f"an item type {what}; expected one of {sorted(table)}")
    return items


def as_dicts(items: list[Any]) -> list[dict]:
    """Items as the client sent them (fields it left out stay out), each with its type."""
    return [item.model_dump(exclude_unset=True) | {"type": item.type} for item in items]
