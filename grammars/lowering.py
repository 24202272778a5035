"""Every spec kind lowered to one of the three forms the libraries take: schema, regex, Lark.

`Choice` becomes a regex alternation of escaped literals and `JsonObject` the schema
`{"type": "object"}`, so a library implements three builders, never five. A JSON schema (and each
inline `%json` schema of a Lark grammar, a tool call's arguments) is lowered to its generation form:
prepared (draft 2020-12, annotations dropped: schema_check.py), then narrowed by the generation
bounds (generation.py). Lowering a schema that cannot be enforced raises GrammarError.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Union

from .bounds import DEFAULT_BOUNDS, GenerationBounds
from .generation import generation_text
from .lark_json import map_inline_schemas
from .schema_check import prepared_schema
from .spec import Choice, Grammar, GrammarSpec, JsonObject, JsonSchema, Regex, canonical_json

LoweredSpec = Union[JsonSchema, Regex, Grammar]

ANY_OBJECT = JsonSchema('{"type":"object"}')

# JSON text between tokens: at most one space, in every library. Bounded whitespace means a model
# cannot pad forever, and a schema whose strings and arrays are bounded has only short outputs.
JSON_WHITESPACE = r"[ ]?"

# Metacharacters of the Rust `regex` dialect that llguidance, outlines-core and xgrammar all parse;
# escaping only these keeps every other character literal in all three.
_META = re.compile(r"([\\.+*?()|\[\]{}^$])")


def escape_regex(text: str) -> str:
    """A regex that matches exactly `text`."""
    return _META.sub(r"\\\1", text)


def choice_regex(options: tuple[str, ...]) -> str:
    """A regex that matches exactly one of `options` (non-empty strings)."""
    return "|".join(f"({escape_regex(option)})" for option in options)


def generation_form(schema_text: str, bounds: GenerationBounds) -> str:
    """The JSON text a library compiles for a user's schema text."""
    return generation_text(prepared_schema(schema_text), bounds)


def _lower_inline(lark: str, bounds: GenerationBounds) -> str:
    def transform(schema: Any) -> Any:
        if not isinstance(schema, dict):
            return schema
        options = {key: value for key, value in schema.items() if key == "x-guidance"}  # llguidance's layout
        user = {key: value for key, value in schema.items() if key != "x-guidance"}
        return {**options, **json.loads(generation_form(canonical_json(user), bounds))}

    return map_inline_schemas(lark, transform)


_LOWER: dict[type, Callable[..., LoweredSpec]] = {
    JsonSchema: lambda spec, bounds: JsonSchema(generation_form(spec.schema, bounds)),
    JsonObject: lambda spec, bounds: JsonSchema(generation_form(ANY_OBJECT.schema, bounds)),   # its keys bounded
    Regex: lambda spec, bounds: spec,
    Choice: lambda spec, bounds: Regex(choice_regex(spec.options)),
    Grammar: lambda spec, bounds: Grammar(_lower_inline(spec.lark, bounds)),
}


def lower(spec: GrammarSpec, bounds: GenerationBounds = DEFAULT_BOUNDS) -> LoweredSpec:
    """The schema, regex or Lark form of `spec` (spec must be a grammars spec kind)."""
    try:
        lowering = _LOWER[type(spec)]
    except KeyError:
        raise TypeError(f"not a grammar spec: {type(spec).__name__}") from None
    return lowering(spec, bounds)
