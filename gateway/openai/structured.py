"""The request's output constraint as /v1 carries it: OpenAI's `response_format`, or vLLM's
`structured_outputs` / `guided_*` extensions. This file only reads those wire shapes into (param, kind, value)
fields; engine/params/constraint.py builds and validates the one constraint, as it does for /v2 and gRPC."""
from __future__ import annotations

from typing import Any

from conch.engine import OutputConstraint, build_constraint
from conch.gateway.conversation.constraint import format_fields
from conch.gateway.errors import APIError

_GUIDED = ("guided_json", "guided_regex", "guided_choice", "guided_grammar")
_STRUCTURED = frozenset({"json", "json_object", "regex", "choice", "grammar"})


def _structured_outputs(value: dict[str, Any]) -> list[tuple[str, str, Any]]:
    kinds = [k for k in value if value[k] is not None]
    unknown = [k for k in kinds if k not in _STRUCTURED]
    if unknown:
        raise APIError(400, f"unsupported structured_outputs fields: {unknown}",
                       param=f"structured_outputs.{unknown[0]}")
    if len(kinds) != 1:
        raise APIError(400, "structured_outputs needs exactly one of json, regex, choice, grammar",
                       param="structured_outputs")
    return [(f"structured_outputs.{kinds[0]}", kinds[0], value[kinds[0]])]


def constraint_fields(body: Any) -> list[tuple[str, str, Any]]:
    """The body's constraint fields as read off the wire (cheap: shapes only, nothing compiled)."""
    fields: list[tuple[str, str, Any]] = []
    if getattr(body, "response_format", None) is not None:
        fields += format_fields(body.response_format)
    if getattr(body, "structured_outputs", None) is not None:
        fields += _structured_outputs(body.structured_outputs)
    return fields + [(name, name, getattr(body, name, None)) for name in _GUIDED]


def output_constraint(body: Any) -> OutputConstraint | None:
    """The one constraint the body asks for, or None. Validates the spec: call off the event loop."""
    return build_constraint(constraint_fields(body))
