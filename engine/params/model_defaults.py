"""A model's own generation defaults, applied to what a request leaves out (as vLLM's `--generation-config auto`
and Ollama's Modelfile parameters do): temperature, top_p, top_k, min_p and repetition_penalty, read from the
model's generation_config.json or its GGUF's `general.sampling.*` metadata (engine/weights/model_files.py).

A value a client sends always wins; a field the model does not set keeps SamplingParams' default (temperature 1,
no top_p / top_k / min_p, no repetition penalty). Which fields a request left out is SamplingParams.model_defaults,
filled in by build_sampling (engine/params/sampling.py); params built in code take no model default.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

from conch.engine.errors import InvalidRequest
from conch.engine.params.sampling import read_value
from conch.engine.params.table import BY_NAME
from conch.engine.types import SamplingParams


@dataclass(frozen=True)
class GenerationDefaults:
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> GenerationDefaults:
        """From generation_config.json's keys; a value of the wrong type or out of its range is dropped (the
        request's check would refuse it for a reason the client did not cause)."""
        kept: dict[str, Any] = {}
        for f in fields(cls):
            value = data.get(f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            try:
                kept[f.name] = read_value(BY_NAME[f.name], value, f.name)
            except InvalidRequest:
                continue
        return cls(**kept)

    @property
    def given(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def apply(self, params: SamplingParams) -> SamplingParams:
        """`params` with this model's value for each field the request left out."""
        chosen = {k: v for k, v in self.given.items() if k in params.model_defaults}
        return replace(params, **chosen, model_defaults=frozenset()) if chosen else params

