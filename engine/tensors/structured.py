"""Structured outputs through Triton's request parameters (and the `sampling_parameters` JSON): `json_schema`,
`regex`, `choice`, `grammar`, `json_object`, or vLLM's `guided_json`, `guided_regex`, `guided_choice`,
`guided_grammar`. The names and the building are engine/params/constraint.py's, shared with /v1.
"""
from __future__ import annotations

from typing import Any

from conch.engine.params import OutputConstraint, build_constraint, constraint_fields


def split_grammar(values: dict[str, Any]) -> tuple[OutputConstraint | None, dict[str, Any]]:
    """(the validated constraint the parameters ask for, or None; the remaining parameters)."""
    fields, rest = constraint_fields(values)
    return build_constraint(fields), rest
