"""Every spec kind lowered to one of the three forms the libraries take: schema, regex, Lark.

`Choice` becomes a regex alternation of escaped literals and `JsonObject` the schema
`{"type": "object"}`, so a library implements three builders, never five.
"""

from __future__ import annotations

import re
from typing import Callable, Union

from .spec import Choice, Grammar, GrammarSpec, JsonObject, JsonSchema, Regex

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


_LOWER: dict[type, Callable[..., LoweredSpec]] = {
    JsonSchema: lambda spec: spec,
    JsonObject: lambda spec: ANY_OBJECT,
    Regex: lambda spec: spec,
    Choice: lambda spec: Regex(choice_regex(spec.options)),
    Grammar: lambda spec: spec,
}


def lower(spec: GrammarSpec) -> LoweredSpec:
    """The schema, regex or Lark form of `spec` (spec must be a grammars spec kind)."""
    try:
        return _LOWER[type(spec)](spec)
    except KeyError:
        raise TypeError(f"not a grammar spec: {type(spec).__name__}") from None
