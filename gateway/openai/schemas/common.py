"""Fields shared by /v1/chat/completions and /v1/completions, and their conversion to SamplingParams."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr, field_validator, model_validator

from conch.engine import InvalidRequest, SamplingParams, build_sampling
from conch.engine.params.table import BY_WIRE_NAME
from conch.gateway.errors import ParamError


class WireModel(BaseModel):
    """Unknown fields are rejected with a 400 that names them, never silently ignored; so is a float that is NaN
    or infinite (also when sent as a string, "nan")."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class StreamOptions(WireModel):
    include_usage: bool = False
    continuous_usage_stats: bool = False


class SamplingFields(WireModel):
    """The sampling fields shared by both /v1 routes. Pydantic reads their types off the wire; their ranges,
    and the SamplingParams they make, are engine/params' table and builder, which every face shares."""

    model: str
    temperature: float | None = None
    top_p: float | None = None
    n: int = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    seed: int | None = None
    user: str | None = None
    # vLLM's extensions, so clients written for vLLM work unchanged.
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    min_tokens: int | None = None
    include_stop_str_in_output: bool = False
    speculative_tokens: int | None = None    # Conch: cap (0: off) this request's multi-token decode steps
    cache: bool = True                       # Conch: opt out of the response cache
    _sampling: SamplingParams = PrivateAttr(default_factory=SamplingParams)

    @field_validator("stream_options")
    @classmethod
    def _options_need_stream(cls, value: StreamOptions | None, info: Any) -> StreamOptions | None:
        if value is not None and not info.data.get("stream"):
            raise ValueError("stream_options is only allowed when stream is true")
        return value

    def route_sampling(self) -> dict[str, Any]:
        """The route's own sampling fields by wire name (max_tokens, logprobs...); a route overrides it."""
        return {}

    @model_validator(mode="after")
    def _build_sampling(self) -> "SamplingFields":
        values = {name: getattr(self, name) for name in _SHARED} | self.route_sampling()
        try:
            self._sampling = build_sampling(values, base=SamplingParams(max_tokens=None))
        except InvalidRequest as exc:
            raise ParamError(exc.param or "body", exc.message) from exc
        return self

    @property
    def sampling(self) -> SamplingParams:
        """This request's SamplingParams (Engine.prepare checks their token ids against the vocabulary)."""
        return self._sampling

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


# The shared fields that are sampling parameters: the table's wire names (engine/params/table.py) this class
# declares; a route's own (max_tokens, logprobs...) come from route_sampling.
_SHARED = tuple(name for name in SamplingFields.model_fields if name in BY_WIRE_NAME)
