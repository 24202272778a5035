"""POST /v1/responses: the wire body, typed all the way down: input items (gateway/openai/schemas/items.py),
tools and tool_choice (wire_tools.py) are unions tagged by `type`, an item type that does not exist is a 400
naming `input.N.type`, and an unknown field is a 400 naming it. items.py and tools.py read the typed values
(as the client sent them, `input_items` / `tool_list` / `choice`) into the Conversation's shapes. A field the
SDKs send with its default value is accepted; a value Conch cannot honour is a 400 naming the field."""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Field, PrivateAttr, Tag, field_validator, model_validator

from conch.engine import InvalidRequest, SamplingParams, build_sampling
from conch.gateway.errors import ParamError
from conch.gateway.openai.responses.wire_tools import ToolChoice, Tools, dumped
from conch.gateway.openai.schemas.common import WireModel
from conch.gateway.openai.schemas.items import RESPONSE_ITEMS, as_dicts, item_union, known_types

LOGPROBS_INCLUDE = "message.output_text.logprobs"
# What `include` may ask for: logprobs are honoured; the others name outputs Conch never produces (hosted
# tools, reasoning, images), so there is nothing to include and asking is harmless.
INCLUDABLE = frozenset({
    LOGPROBS_INCLUDE, "reasoning.encrypted_content", "file_search_call.results", "web_search_call.results",
    "web_search_call.action.sources", "message.input_image.image_url", "computer_call_output.output.image_url",
    "code_interpreter_call.outputs",
})
_WIRE_NAMES = {"max_tokens": "max_output_tokens", "logprobs": "top_logprobs"}   # engine name -> this face's


MAX_INPUT_ITEMS = 4096
InputItem = item_union(RESPONSE_ITEMS)
# a string, or a list of items: tagged, so a bad item's 400 names its own path (`input.0.role`), not the string's
Input = Annotated[Union[Annotated[str, Tag("[text]")],
                        Annotated[list[InputItem], Field(max_length=MAX_INPUT_ITEMS), Tag("[items]")]],  # type: ignore
                  Discriminator(lambda value: "[text]" if isinstance(value, str) else "[items]")]


class PlainFormat(WireModel):
    type: Literal["text", "json_object"]


class JsonSchemaFormat(WireModel):
    type: Literal["json_schema"]
    name: Annotated[str, Field(max_length=256)] | None = None
    schema_: Annotated[dict[str, Any] | bool, Field(alias="schema")]
    strict: bool | None = None
    description: str | None = None


class TextConfig(WireModel):
    format: Annotated[PlainFormat | JsonSchemaFormat, Field(discriminator="type")] | None = None
    verbosity: Literal["medium"] | None = None        # Conch's models have one verbosity: the default's


class ReasoningConfig(WireModel):
    """The SDKs send it for reasoning models; Conch's models do not reason, so only "no effort" is honoured."""

    effort: Literal["none", "minimal"] | None = None
    summary: None = None
    generate_summary: None = None


class ConversationRef(WireModel):
    id: str


class ResponseStreamOptions(WireModel):
    include_obfuscation: bool | None = None


class ResponsesRequest(WireModel):
    model: str
    input: Input = Field(default_factory=list)
    instructions: str | None = None
    tools: Tools | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_tool_calls: Annotated[int, Field(ge=1)] | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_logprobs: int | None = None
    text: TextConfig | None = None
    reasoning: ReasoningConfig | None = None
    store: bool | None = True
    previous_response_id: str | None = None
    conversation: str | ConversationRef | None = None
    metadata: Annotated[dict[str, str], Field(max_length=16)] | None = None
    include: list[str] | None = None
    truncation: Literal["disabled"] | None = None     # "auto" would drop turns silently: Conch answers a 400
    user: str | None = None
    prompt_cache_key: str | None = None               # a hint: Conch's prefix cache and kept slots are automatic
    safety_identifier: str | None = None
    service_tier: Literal["auto", "default"] | None = None
    background: bool | None = False
    stream: bool | None = False
    stream_options: ResponseStreamOptions | None = None
    _sampling: SamplingParams = PrivateAttr(default_factory=SamplingParams)

    @field_validator("input", mode="before")
    @classmethod
    def _item_types(cls, value: Any) -> Any:
        return known_types("input", value, RESPONSE_ITEMS, "of the Responses API")

    @field_validator("include")
    @classmethod
    def _known_includes(cls, value: list[str] | None) -> list[str] | None:
        unknown = [v for v in value or () if v not in INCLUDABLE]
        if unknown:
            raise ParamError("include", f"include values {unknown} are not supported; supported: "
                                        f"{sorted(INCLUDABLE)}")
        return value

    @model_validator(mode="after")
    def _check(self) -> "ResponsesRequest":
        if self.stream_options is not None and not self.stream:
            raise ParamError("stream_options", "stream_options is only allowed when stream is true")
        if self.previous_response_id is not None and self.conversation is not None:
            raise ParamError("previous_response_id", "previous_response_id and conversation cannot both be given")
        if self.background and not self.stored:
            raise ParamError("background", "a background response must be stored (store: true)")
        if self.background and self.stream:
            raise ParamError("background", "background responses are polled with GET; stream is not supported "
                                           "with background")
        self._sampling = _sampling(self)
        return self

    @property
    def input_items(self) -> str | list[dict[str, Any]]:
        """The input as the client sent it (a string, or its items with their types), for items.py."""
        return self.input if isinstance(self.input, str) else as_dicts(self.input)

    @property
    def tool_list(self) -> list[dict[str, Any]] | None:
        return dumped(self.tools)

    @property
    def choice(self) -> str | dict[str, Any] | None:
        return dumped(self.tool_choice)

    @property
    def stored(self) -> bool:
        return self.store is not False

    @property
    def conversation_id(self) -> str | None:
        return self.conversation.id if isinstance(self.conversation, ConversationRef) else self.conversation

    @property
    def wants_logprobs(self) -> bool:
        return LOGPROBS_INCLUDE in (self.include or ()) or bool(self.top_logprobs)

    @property
    def sampling(self) -> SamplingParams:
        return self._sampling

    @property
    def output_format(self) -> dict[str, Any] | None:
        return dumped(self.text.format) if self.text is not None else None


def _sampling(body: ResponsesRequest) -> SamplingParams:
    values = {"max_tokens": body.max_output_tokens, "temperature": body.temperature, "top_p": body.top_p,
              "logprobs": (body.top_logprobs or 0) if body.wants_logprobs else None}
    try:
        return build_sampling(values, base=SamplingParams(max_tokens=None))
    except InvalidRequest as exc:
        param = _WIRE_NAMES.get(exc.param or "", exc.param or "body")
        raise ParamError(param, exc.message.replace(f"'{exc.param}'", f"'{param}'")) from exc
