"""Sampling parameters as Triton's LLM backends take them: a JSON object whose values may be strings."""
from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from engine.errors import InvalidRequest
from engine.sampling import checked_sampling
from engine.types import SamplingParams

# Request parameters that steer the face, not the sampler.
CONTROL_KEYS = frozenset({"stream", "exclude_input_in_output", "return_finish_reason", "return_num_input_tokens",
                          "return_num_output_tokens", "triton_enable_empty_final_response", "priority",
                          "timeout", "binary_data_output"})
_TYPES = {"max_tokens": int, "min_tokens": int, "temperature": float, "top_p": float, "top_k": int, "min_p": float,
          "seed": int, "presence_penalty": float, "frequency_penalty": float, "repetition_penalty": float,
          "ignore_eos": bool, "include_stop_str_in_output": bool, "stop": tuple, "stop_token_ids": tuple}
# The numeric limits of the others are engine/sampling.py's, shared by every face.
_RANGES = {"max_tokens": (1, 1 << 31), "min_tokens": (0, 1 << 31)}


def parse_json_object(raw: str, name: str) -> dict[str, Any]:
    try:
        data = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"'{name}' is not valid JSON: {exc}", param=name) from exc
    if not isinstance(data, dict):
        raise InvalidRequest(f"'{name}' must be a JSON object", param=name)
    return data


def sampling_params(values: dict[str, Any]) -> SamplingParams:
    """Unknown keys are rejected by name; strings are coerced to the field's type."""
    values = {k: v for k, v in values.items() if k not in CONTROL_KEYS}
    unknown = sorted(set(values) - set(_TYPES))
    if unknown:
        raise InvalidRequest(f"unsupported sampling parameter(s) {unknown}; supported: {sorted(_TYPES)}",
                             param=unknown[0])
    parsed = {k: _coerce(k, v) for k, v in values.items() if v is not None}
    known = {f.name for f in fields(SamplingParams)}
    return checked_sampling(SamplingParams(**{k: v for k, v in parsed.items() if k in known}))


def _coerce(key: str, value: Any) -> Any:
    kind = _TYPES[key]
    try:
        if kind is tuple:
            return _sequence(key, value)
        if kind is bool:
            return _bool(value)
        out = kind(float(value)) if kind is int and isinstance(value, str) and "." in value else kind(value)
    except (TypeError, ValueError, OverflowError) as exc:     # int(inf) overflows
        raise InvalidRequest(f"sampling parameter '{key}' must be {kind.__name__}, got {value!r}", param=key) from exc
    if kind is int and isinstance(value, float) and value != int(value):
        raise InvalidRequest(f"sampling parameter '{key}' must be an integer, got {value!r}", param=key)
    bounds = _RANGES.get(key)
    if bounds is not None and not bounds[0] <= out <= bounds[1]:
        low, high = bounds
        raise InvalidRequest(f"sampling parameter '{key}' must be in [{low}, {high}], got {value!r}", param=key)
    return out


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ValueError(value)


def _sequence(key: str, value: Any) -> tuple:
    if isinstance(value, str) and value.startswith("["):
        value = json.loads(value)
    items = [value] if isinstance(value, (str, int)) else list(value)
    if key == "stop_token_ids":
        return tuple(int(v) for v in items)
    return tuple(str(v) for v in items)
