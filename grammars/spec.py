"""What a request asks the output to be: the five spec kinds, frozen and hashable.

A spec is a cache key (with the tokenizer and the library), so each one is a frozen dataclass of
plain strings. JSON schemas are stored as canonical JSON text: compact separators, key order kept
(property order is the order the output is generated in, so it is part of the meaning).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Union


def canonical_json(value: Any) -> str:
    """Compact JSON text with the key order kept; equal documents give equal strings."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@dataclass(frozen=True)
class JsonSchema:
    """Output is one JSON value valid under `schema` (JSON Schema text, 2020-12 by default)."""

    schema: str

    def __post_init__(self) -> None:
        try:  # canonicalise when it parses; `validate` reports text that does not
            object.__setattr__(self, "schema", canonical_json(json.loads(self.schema)))
        except (TypeError, ValueError):
            pass

    @classmethod
    def from_dict(cls, schema: dict[str, Any]) -> "JsonSchema":
        return cls(canonical_json(schema))

    def as_dict(self) -> Any:
        return json.loads(self.schema)


@dataclass(frozen=True)
class JsonObject:
    """Output is any one JSON object (OpenAI's `response_format: {"type": "json_object"}`)."""


@dataclass(frozen=True)
class Regex:
    """Output matches `pattern` as a whole (no anchors needed)."""

    pattern: str


@dataclass(frozen=True)
class Choice:
    """Output is exactly one of `options`."""

    options: tuple[str, ...]

    def __post_init__(self) -> None:
        if isinstance(self.options, list):  # accept a list, store a (hashable) tuple
            object.__setattr__(self, "options", tuple(self.options))


@dataclass(frozen=True)
class Grammar:
    """Output is a sentence of a Lark-style EBNF grammar whose start rule is `start`.

    With llguidance the grammar may embed JSON schemas inline, for tool calls:
    `start: "<tool_call>" %json{"type": "object"} "</tool_call>"`.
    """

    lark: str


GrammarSpec = Union[JsonSchema, JsonObject, Regex, Choice, Grammar]
SPEC_KINDS: tuple[type, ...] = (JsonSchema, JsonObject, Regex, Choice, Grammar)
