"""Fields shared by /v1/chat/completions and /v1/completions, and their conversion to SamplingParams."""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.sampling import checked_sampling
from engine.types import SamplingParams
from gateway.errors import ParamError

MAX_STOP = 16


class WireModel(BaseModel):
    """Unknown fields are rejected with a 400 that names them, never silently ignored."""

    model_config = ConfigDict(extra="forbid")


class StreamOptions(WireModel):
    include_usage: bool = False
    continuous_usage_stats: bool = False


class SamplingFields(WireModel):
    model: str
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    n: Annotated[int, Field(ge=1, le=16)] = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    presence_penalty: Annotated[float, Field(ge=-2.0, le=2.0)] = 0.0
    frequency_penalty: Annotated[float, Field(ge=-2.0, le=2.0)] = 0.0
    logit_bias: dict[str, Annotated[float, Field(ge=-100.0, le=100.0)]] | None = None
    seed: int | None = None
    user: str | None = None
    # vLLM's extensions, so clients written for vLLM work unchanged.
    top_k: Annotated[int, Field(ge=-1)] | None = None
    min_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0.0, le=2.0)] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    min_tokens: Annotated[int, Field(ge=0)] = 0
    include_stop_str_in_output: bool = False
    cache: bool = True                       # Conch: opt out of the response cache

    @field_validator("stop")
    @classmethod
    def _check_stop(cls, value: str | list[str] | None) -> str | list[str] | None:
        stops = [value] if isinstance(value, str) else value or []
        if len(stops) > MAX_STOP:
            raise ValueError(f"at most {MAX_STOP} stop sequences are supported")
        if any(not s for s in stops):
            raise ValueError("stop sequences must not be empty")
        return value

    @field_validator("stream_options")
    @classmethod
    def _options_need_stream(cls, value: StreamOptions | None, info: Any) -> StreamOptions | None:
        if value is not None and not info.data.get("stream"):
            raise ValueError("stream_options is only allowed when stream is true")
        return value

    def sampling_params(self, max_tokens: int | None, logprobs: int | None, vocab_size: int) -> SamplingParams:
        bias = self._logit_bias(vocab_size)
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        for token_id in self.stop_token_ids or []:
            if not 0 <= token_id < vocab_size:
                raise ParamError("stop_token_ids",
                                 f"token id {token_id} is outside the vocabulary (0..{vocab_size - 1})")
        return checked_sampling(SamplingParams(      # the numeric limits every face shares
            max_tokens=max_tokens,
            min_tokens=self.min_tokens,
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            top_k=self.top_k or 0,
            min_p=self.min_p or 0.0,
            seed=self.seed,
            presence_penalty=self.presence_penalty,
            frequency_penalty=self.frequency_penalty,
            repetition_penalty=self.repetition_penalty or 1.0,
            logit_bias=bias,
            stop=tuple(stops),
            stop_token_ids=tuple(self.stop_token_ids or ()),
            ignore_eos=self.ignore_eos,
            n=self.n,
            logprobs=logprobs,
            include_stop_str_in_output=self.include_stop_str_in_output,
        ), vocab_size)

    def _logit_bias(self, vocab_size: int) -> tuple[tuple[int, float], ...]:
        out = []
        for key, bias in (self.logit_bias or {}).items():
            if not key.lstrip("-").isdigit() or not 0 <= int(key) < vocab_size:
                raise ParamError("logit_bias", f"logit_bias key '{key}' is not a token id in 0..{vocab_size - 1}")
            out.append((int(key), float(bias)))
        return tuple(sorted(out))

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)
