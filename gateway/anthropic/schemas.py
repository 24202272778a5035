"""/v1/messages and /v1/messages/count_tokens request bodies, as Anthropic's Messages API sends them.

Unknown fields are a 400 naming them (WireModel). Content blocks are a union tagged by `type`, so an unknown
block type is a 400 naming the block and the types there are. What the wire allows but Conch refuses (image and
document blocks, Anthropic's server tools) parses here and is refused, naming the field, in
gateway/anthropic/conversation.py."""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, model_validator

from conch.gateway.errors import ParamError
from conch.gateway.wire import WireModel


class CacheControl(WireModel):
    type: Literal["ephemeral"]
    ttl: str | None = None


class TextBlock(WireModel):
    type: Literal["text"]
    text: str
    cache_control: CacheControl | None = None
    citations: list[dict[str, Any]] | None = None


class MediaBlock(WireModel):
    """image / document: parsed so the refusal can name the block."""

    type: Literal["image", "document"]
    source: dict[str, Any]
    cache_control: CacheControl | None = None
    title: str | None = None
    context: str | None = None
    citations: dict[str, Any] | None = None


class ToolUseBlock(WireModel):
    type: Literal["tool_use"]
    id: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]
    input: dict[str, Any]
    cache_control: CacheControl | None = None
    caller: dict[str, Any] | None = None
    toolset_name: str | None = None


class ToolResultBlock(WireModel):
    type: Literal["tool_result"]
    tool_use_id: Annotated[str, Field(min_length=1)]
    content: str | list[Annotated[Union[TextBlock, MediaBlock], Field(discriminator="type")]] | None = None
    is_error: bool | None = None
    cache_control: CacheControl | None = None
    toolset_name: str | None = None


class ThinkingBlock(WireModel):
    """A reasoning model's earlier turn, sent back: rendered when its signature is this deployment's seal."""

    type: Literal["thinking"]
    thinking: str
    signature: str | None = None


class RedactedThinkingBlock(WireModel):
    type: Literal["redacted_thinking"]
    data: str


Block = Annotated[Union[TextBlock, MediaBlock, ToolUseBlock, ToolResultBlock, ThinkingBlock, RedactedThinkingBlock],
                  Field(discriminator="type")]


class TurnConfig(WireModel):
    """A message's own output_config (beta per-turn-control-2026-07-01): `effort` from this turn on, accepted
    and changing nothing, as the top-level one."""

    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None


class Message(WireModel):
    """`system` inside `messages`: Claude Code's per-turn instructions (beta per-turn-control-2026-07-01)."""

    role: Literal["user", "assistant", "system"]
    content: str | list[Block]
    output_config: TurnConfig | None = None


class Tool(WireModel):
    """A client tool. Anthropic's server tools (web_search_*, bash_*...) are refused before this parses."""

    type: Literal["custom"] | None = None
    name: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_\-]+$")]
    description: str | None = None
    input_schema: dict[str, Any]
    cache_control: CacheControl | None = None
    strict: bool | None = None              # Conch's grammars enforce the schema of forced calls either way
    input_examples: list[dict[str, Any]] | None = None
    allowed_callers: list[str] | None = None
    defer_loading: bool | None = None
    eager_input_streaming: bool | None = None


class ToolChoice(WireModel):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None

    @model_validator(mode="after")
    def _named(self) -> "ToolChoice":
        if (self.type == "tool") != (self.name is not None):
            raise ParamError("tool_choice.name", "tool_choice.name is required with type 'tool', and only there")
        return self


class Thinking(WireModel):
    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = None
    # "updates" (Claude Code 2.1.332's first try, beta thinking-display-updates-2026-08-18): only the progress
    # notes a model writes between tool calls come back, the reasoning stays hidden; an open model writes no
    # such notes, so it is served as "omitted"
    display: Literal["summarized", "omitted", "updates"] | None = None


class JsonOutputFormat(WireModel):
    type: Literal["json_schema"]
    schema_: Annotated[dict[str, Any], Field(alias="schema")]


class OutputConfig(WireModel):
    """Structured outputs (`format`: the answer is JSON of this schema, by the same grammars as chat's
    response_format); `effort` is accepted and changes nothing (the models do not reason)."""

    format: JsonOutputFormat | None = None
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None


# context_management: what each edit does is gateway/anthropic/context_edits.py
class TokenCount(WireModel):
    type: Literal["input_tokens"]
    value: Annotated[int, Field(ge=0)]


class ToolUseCount(WireModel):
    type: Literal["tool_uses"]
    value: Annotated[int, Field(ge=0)]


class ThinkingTurns(WireModel):
    type: Literal["thinking_turns"]
    value: Annotated[int, Field(ge=0)]


class ClearToolUses(WireModel):
    type: Literal["clear_tool_uses_20250919"]
    trigger: Annotated[Union[TokenCount, ToolUseCount], Field(discriminator="type")] | None = None
    keep: ToolUseCount | None = None
    clear_at_least: TokenCount | None = None
    exclude_tools: list[str] | None = None
    clear_tool_inputs: bool | list[str] | None = None


class ClearThinking(WireModel):
    type: Literal["clear_thinking_20251015"]
    keep: ThinkingTurns | Literal["all"] | None = None


Edit = Annotated[Union[ClearToolUses, ClearThinking], Field(discriminator="type")]


class ContextManagement(WireModel):
    edits: list[Edit] = Field(default_factory=list)



class Metadata(WireModel):
    user_id: str | None = None


class CountTokensRequest(WireModel):
    """What count_tokens takes: the prompt's part of a Messages body. `output_format` is the structured-outputs
    beta's top-level name (litellm sends it): read as `output_config.format`."""

    model: str
    messages: Annotated[list[Message], Field(min_length=1)]
    system: str | list[TextBlock] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    thinking: Thinking | None = None
    output_config: OutputConfig | None = None
    output_format: JsonOutputFormat | None = None
    cache_control: CacheControl | None = None   # Conch keeps every prompt's KV without being asked
    context_management: ContextManagement | None = None     # gateway/anthropic/context_edits.py

    @model_validator(mode="after")
    def _output_format(self) -> "CountTokensRequest":
        if self.output_format is None:
            return self
        if self.output_config is not None and self.output_config.format is not None:
            raise ParamError("output_format", "output_format is output_config.format's beta name: give one of them")
        config = self.output_config or OutputConfig()
        self.output_config = config.model_copy(update={"format": self.output_format})
        return self

    @model_validator(mode="before")
    @classmethod
    def _check_tags(cls, data: Any) -> Any:
        """What a tagged union would misreport (its first branch's complaint), refused by name first."""
        if isinstance(data, dict):
            _no_server_tools(data.get("tools"))
            for i, message in enumerate(_items(data.get("messages"))):
                content = message.get("content") if isinstance(message, dict) else None
                for j, block in enumerate(_items(content)):
                    _known_type(block, f"messages.{i}.content.{j}", BLOCK_TYPES)
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        for k, part in enumerate(_items(block.get("content"))):
                            _known_type(part, f"messages.{i}.content.{j}.content.{k}", RESULT_TYPES)
        return data


BLOCK_TYPES = ("text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking")
RESULT_TYPES = ("text", "image", "document")


def _items(value: Any) -> list:
    return value if isinstance(value, list) else []


def _known_type(block: Any, path: str, known: tuple[str, ...]) -> None:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind not in known:
        raise ParamError(f"{path}.type", f"{path}: unknown content block type {kind!r}; Conch takes {list(known)}")


def _no_server_tools(tools: Any) -> None:
    for i, tool in enumerate(_items(tools)):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind not in (None, "custom"):
            raise ParamError(f"tools.{i}.type", f"tools[{i}]: '{kind}' is one of Anthropic's server tools, "
                             "which Conch does not run; declare a client tool (name, description, "
                             "input_schema) and run it yourself")


class MessagesRequest(CountTokensRequest):
    max_tokens: Annotated[int, Field(ge=1)]
    stop_sequences: list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stream: bool = False
    metadata: Metadata | None = None
    # Accepted and not acted on: one server, one tier, one speed, one place.
    service_tier: Literal["auto", "standard_only"] | None = None
    speed: Literal["standard", "fast"] | None = None
    inference_geo: str | None = None
    diagnostics: dict[str, Any] | None = None
    container: str | dict[str, Any] | None = None
