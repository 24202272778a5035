"""/v1/chat/completions request."""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, field_validator, model_validator

from conch.gateway.errors import ParamError
from conch.gateway.openai.schemas.common import SamplingFields
from conch.gateway.wire import WireModel


class TextPart(WireModel):
    type: Literal["text"]
    text: str


class ImageURL(WireModel):
    url: str                    # a data URL, or an http(s) URL the gateway may fetch (docs/vision.md)
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(WireModel):
    type: Literal["image_url"]
    image_url: ImageURL


ContentPart = Annotated[Union[TextPart, ImagePart], Field(discriminator="type")]


class FunctionCall(WireModel):
    name: str
    arguments: str


class ToolCallIn(WireModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class FunctionDef(WireModel):
    name: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(WireModel):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(WireModel):
    name: str


class NamedToolChoice(WireModel):
    type: Literal["function"]
    function: NamedFunction


class Message(WireModel):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None   # an assistant turn's thinking, sent back (vLLM's, DeepSeek's field)

    @field_validator("content", mode="before")
    @classmethod
    def _known_parts(cls, content: Any) -> Any:
        """An audio or file part is named (pydantic alone would say "Input should be a valid string"); an image
        part is read here and refused by a model without vision (gateway/conversation/request.py)."""
        for part in content if isinstance(content, list) else ():
            kind = part.get("type") if isinstance(part, dict) else None
            if isinstance(kind, str) and kind not in ("text", "image_url"):
                raise ValueError(f"content parts of type '{kind}' are not supported: send 'text' parts, "
                                 f"'image_url' parts (a vision model) or a string")
        return content


class ChatCompletionRequest(SamplingFields):
    messages: Annotated[list[Message], Field(min_length=1)]
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    response_format: dict[str, Any] | None = None
    tools: list[Tool] | None = None
    tool_choice: Union[Literal["none", "auto", "required"], NamedToolChoice] | None = None
    parallel_tool_calls: bool | None = None
    structured_outputs: dict[str, Any] | None = None
    guided_json: dict[str, Any] | str | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    # the reasoning model's switch and budget (gateway/conversation/reasoning.py); None: the model's default
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    thinking_token_budget: Annotated[int, Field(ge=0)] | None = None   # vLLM's: most thinking tokens, enforced

    @model_validator(mode="before")
    @classmethod
    def _check(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("top_logprobs") is not None and not data.get("logprobs"):
            raise ParamError("top_logprobs", "top_logprobs requires logprobs to be true")
        return data

    def route_sampling(self) -> dict[str, Any]:
        """max_completion_tokens wins over max_tokens (OpenAI's newer name); top_logprobs is `logprobs` below."""
        tokens = ("max_completion_tokens", self.max_completion_tokens) if self.max_completion_tokens is not None \
            else ("max_tokens", self.max_tokens)
        return {tokens[0]: tokens[1], "top_logprobs": (self.top_logprobs or 0) if self.logprobs else None}
