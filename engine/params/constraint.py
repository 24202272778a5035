"""The one output-constraint builder every face calls: wire fields -> one validated `grammars` spec.

A face lists the constraint fields its request gave as (param, kind, value): /v1 reads them from
`response_format`, `structured_outputs` and vLLM's `guided_*` fields; /v2 and gRPC from Triton's
`parameters` / `sampling_parameters` (`json_schema`, `regex`, `choice`, `grammar`, `json_object`, or the
`guided_*` aliases). At most one may be given; it becomes one spec, validated up front, so that a spec Conch
cannot enforce is an InvalidRequest naming the parameter (and the JSON Schema keyword at fault).
`validate` may walk a large schema: call this off the event loop.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from conch.engine.errors import InvalidRequest
from conch.engine.params.kinds import read_bool
from conch.grammars import Choice, Grammar, GrammarError, GrammarSpec, JsonObject, JsonSchema, Regex, validate


@dataclass(frozen=True)
class OutputConstraint:
    """What the output must be, and the request field that asked for it (errors name it)."""

    spec: GrammarSpec
    param: str


def _decoded(value: Any, name: str, kinds: tuple[type, ...], what: str) -> Any:
    """A JSON value given as itself or as JSON text (gRPC parameters carry only strings, ints and bools)."""
    if isinstance(value, str) and str not in kinds:
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidRequest(f"'{name}' is not valid JSON: {exc}", param=name, code="invalid_schema") from exc
    if not isinstance(value, kinds):
        raise InvalidRequest(f"'{name}' must be {what}, got {type(value).__name__}", param=name,
                             code="invalid_schema" if dict in kinds else None)
    return value


def _strings(value: Any, name: str) -> tuple[str, ...]:
    options = _decoded(value, name, (list,), "a list of strings")
    if not all(isinstance(o, str) for o in options):
        raise InvalidRequest(f"'{name}' must be a list of strings", param=name)
    return tuple(options)


def _json_object(value: Any, name: str) -> JsonObject | None:
    try:
        return JsonObject() if read_bool(value) else None
    except TypeError:
        raise InvalidRequest(f"'{name}' must be a boolean, got {value!r}", param=name) from None


KINDS: dict[str, Callable[[Any, str], GrammarSpec | None]] = {
    "json_schema": lambda v, n: JsonSchema.from_dict(_decoded(v, n, (dict, bool), "a JSON Schema object")),
    "json_object": _json_object,
    "regex": lambda v, n: Regex(_decoded(v, n, (str,), "a string")),
    "choice": lambda v, n: Choice(_strings(v, n)),
    "grammar": lambda v, n: Grammar(_decoded(v, n, (str,), "a string")),
}
# vLLM's names: `structured_outputs.json` and the older `guided_*` request fields
ALIASES = {"json": "json_schema", "guided_json": "json_schema", "guided_regex": "regex", "guided_choice": "choice",
           "guided_grammar": "grammar"}
NAMES = frozenset(KINDS) | frozenset(ALIASES)


def build_constraint(given: Iterable[tuple[str, str, Any]]) -> OutputConstraint | None:
    """The one constraint of (param, kind or alias, value) fields whose value is not None, or None. Fields are
    taken in the order of their names, so that a wire without order (a protobuf map) reads the same."""
    fields = sorted(((param, ALIASES.get(kind, kind), value) for param, kind, value in given if value is not None),
                    key=lambda field: field[0])
    specs = [(param, KINDS[kind](value, param)) for param, kind, value in fields]
    built = [(param, spec) for param, spec in specs if spec is not None]   # None: json_object false
    if not built:
        return None
    if len(built) > 1:
        raise InvalidRequest(f"only one output constraint may be given, got {[p for p, _ in built]}",
                             param=built[1][0])
    param, spec = built[0]
    try:
        validate(spec)
    except GrammarError as exc:
        raise InvalidRequest(f"'{param}': {exc.message}", param=param,
                             code="unsupported_schema" if exc.keyword else "invalid_grammar") from exc
    return OutputConstraint(spec, param)


def constraint_fields(values: dict[str, Any]) -> tuple[list[tuple[str, str, Any]], dict[str, Any]]:
    """(the constraint fields of a flat parameter map, named as given; the other parameters)."""
    fields = [(k, k, v) for k, v in values.items() if k in NAMES]
    return fields, {k: v for k, v in values.items() if k not in NAMES}
