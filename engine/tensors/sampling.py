"""Triton's request parameters (and the `sampling_parameters` JSON) read into the one builder's types.

This is only how the tensor faces (/v2 generate, gRPC, an ensemble's LLM step) carry parameters: a flat JSON
object whose values may be text. Which names exist, their types and limits are engine/params' table, shared
with /v1; the keys that steer the face rather than the sampler are set aside here.
"""
from __future__ import annotations

from typing import Any

from conch.engine.errors import InvalidRequest
from conch.engine.params import TENSOR_NAMES, build_sampling
from conch.engine.params.json_text import loads
from conch.engine.types import SamplingParams

# Request parameters that steer the face, not the sampler.
CONTROL_KEYS = frozenset({"stream", "exclude_input_in_output", "return_finish_reason", "return_num_input_tokens",
                          "return_num_output_tokens", "triton_enable_empty_final_response", "priority",
                          "timeout", "binary_data_output"})


def parse_json_object(raw: str, name: str) -> dict[str, Any]:
    try:
        data = loads(raw) if raw.strip() else {}
    except ValueError as exc:                     # not JSON, too deep, or a number past Python's digit limit
        raise InvalidRequest(f"'{name}' is not valid JSON: {exc}", param=name) from exc
    if not isinstance(data, dict):
        raise InvalidRequest(f"'{name}' must be a JSON object", param=name)
    return data


def sampling_params(values: dict[str, Any]) -> SamplingParams:
    """Unknown keys are rejected by name; text values are read as the table's types."""
    return build_sampling({k: v for k, v in values.items() if k not in CONTROL_KEYS}, accepted=TENSOR_NAMES)
