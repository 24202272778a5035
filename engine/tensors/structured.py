"""Structured outputs through Triton's request parameters (and the `sampling_parameters` JSON): `json_schema`,
`regex`, `choice`, `grammar`, or vLLM's `guided_json`, `guided_regex`, `guided_choice`, `guided_grammar`.

At most one is given; it becomes one `grammars` spec, validated up front so that a spec Conch cannot enforce
is an InvalidRequest (400 / INVALID_ARGUMENT) naming the parameter and the JSON Schema keyword at fault.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from engine.errors import InvalidRequest
from grammars import Choice, Grammar, GrammarError, GrammarSpec, JsonSchema, Regex, validate


def _decoded(value: Any, name: str, kind: type) -> Any:
    """A JSON value given as itself or as JSON text (gRPC parameters carry only strings, ints and bools)."""
    if isinstance(value, str) and kind is not str:
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidRequest(f"parameter '{name}' is not valid JSON: {exc}", param=name) from exc
    if not isinstance(value, kind):
        raise InvalidRequest(f"parameter '{name}' must be {_KIND_NAMES[kind]}, got {type(value).__name__}",
                             param=name)
    return value


_KIND_NAMES: dict[type, str] = {dict: "a JSON Schema object", list: "a list of strings", str: "a string"}

_BUILDERS: dict[str, Callable[[Any, str], GrammarSpec]] = {
    "json_schema": lambda v, n: JsonSchema.from_dict(_decoded(v, n, dict)),
    "regex": lambda v, n: Regex(_decoded(v, n, str)),
    "choice": lambda v, n: Choice(tuple(_decoded(v, n, list))),
    "grammar": lambda v, n: Grammar(_decoded(v, n, str)),
}
_ALIASES = {"guided_json": "json_schema", "guided_regex": "regex", "guided_choice": "choice",
            "guided_grammar": "grammar"}
GRAMMAR_KEYS = frozenset(_BUILDERS) | frozenset(_ALIASES)


def split_grammar(values: dict[str, Any]) -> tuple[GrammarSpec | None, dict[str, Any]]:
    """(the validated spec the parameters ask for, or None; the remaining parameters)."""
    given = [k for k in values if k in GRAMMAR_KEYS and values[k] is not None]
    rest = {k: v for k, v in values.items() if k not in GRAMMAR_KEYS}
    if not given:
        return None, rest
    if len(given) > 1:
        raise InvalidRequest(f"only one output constraint may be given, got {given}", param=given[1])
    name = given[0]
    spec = _BUILDERS[_ALIASES.get(name, name)](values[name], name)
    try:
        validate(spec)
    except GrammarError as exc:
        raise InvalidRequest(f"parameter '{name}': {exc.message}", param=name) from exc
    return spec, rest
