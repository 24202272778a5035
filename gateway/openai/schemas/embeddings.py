"""POST /v1/embeddings, as OpenAI defines it: input as text, texts, token ids or lists of token ids."""
from __future__ import annotations

from typing import Annotated, Literal, cast

from pydantic import Field, field_validator

from conch.engine.embedding import EmbeddingRequest as EngineEmbeddingRequest
from conch.gateway.wire import WireModel

MAX_INPUTS = 2048           # OpenAI's limit on the items of one request

Input = str | list[Annotated[int, Field(ge=0)]] | list[list[Annotated[int, Field(ge=0)]]] | list[str]


class EmbeddingRequest(WireModel):
    model: str
    input: Input
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: Annotated[int, Field(ge=1)] | None = None
    user: str | None = None
    priority: int = 0                         # vLLM's extension: the batcher's priority level (0: default)

    @field_validator("input")
    @classmethod
    def _check_input(cls, value: Input) -> Input:
        if isinstance(value, list):
            if not value:
                raise ValueError("input must not be an empty array")
            if len(value) > MAX_INPUTS:
                raise ValueError(f"input holds {len(value)} items; at most {MAX_INPUTS} are allowed")
        return value

    def to_engine(self, request_id: str) -> EngineEmbeddingRequest:
        value = self.input
        if isinstance(value, str) or (value and isinstance(value[0], str)):
            # value[0] does not narrow the union for mypy: the casts name what the checks above found
            texts = (value,) if isinstance(value, str) else tuple(cast("list[str]", value))
            return EngineEmbeddingRequest(request_id, self.model, texts=texts, dimensions=self.dimensions,
                                          priority=self.priority)
        rows = ((tuple(cast("list[int]", value)),) if isinstance(value[0], int)
                else tuple(tuple(r) for r in cast("list[list[int]]", value)))
        return EngineEmbeddingRequest(request_id, self.model, token_ids=rows, dimensions=self.dimensions,
                                      priority=self.priority)
