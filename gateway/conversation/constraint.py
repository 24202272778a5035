"""OpenAI's `response_format` read into constraint fields ((param, kind, value), engine.build_constraint's
input). Chat's `response_format` and Responses' `text.format` (read into chat's shape) share it."""
from __future__ import annotations

from typing import Any

from conch.engine import OutputConstraint, build_constraint
from conch.gateway.conversation.types import Conversation
from conch.gateway.errors import APIError

_JSON_SCHEMA_FIELDS = frozenset({"name", "schema", "strict", "description"})


def format_fields(value: dict[str, Any], param: str = "response_format") -> list[tuple[str, str, Any]]:
    """`value` is chat's response_format: {"type": "text" | "json_object" | "json_schema", "json_schema"?}."""
    kind = value.get("type")
    if kind == "text":
        return []
    if kind == "json_object":
        return [(param, "json_object", True)]
    if kind == "json_schema":
        inner = value.get("json_schema")
        if not isinstance(inner, dict) or "schema" not in inner:
            raise APIError(400, f"{param}.json_schema.schema is required", param=f"{param}.json_schema")
        unknown = set(inner) - _JSON_SCHEMA_FIELDS
        if unknown:
            raise APIError(400, f"unsupported fields in {param}.json_schema: {sorted(unknown)}",
                           param=f"{param}.json_schema")
        return [(param, "json_schema", inner["schema"])]        # OpenAI names the field itself
    raise APIError(400, f"{param}.type must be text, json_object or json_schema, not {kind!r}",
                   param=f"{param}.type")


def conversation_constraint(conv: Conversation) -> OutputConstraint | None:
    """The one constraint the conversation asks for, or None. Validates the spec: call off the event loop."""
    return build_constraint(list(conv.constraints))
