"""`validate(spec)`: the up-front check the server runs before a request queues.

Fast and tokenizer-free: it never compiles. Two layers, in order: library-neutral checks (the
schema parses, is valid JSON Schema, uses only enforced keywords; the regex parses; the choice
is non-empty; the grammar is text), then the chosen library's own `check`, which refuses what
that library cannot enforce exactly. Everything it refuses is a GrammarError: a 400 at the edge.
"""

from __future__ import annotations

import json
from typing import Callable

from .bounds import DEFAULT_BOUNDS, GenerationBounds
from .cache import LRUCache
from .errors import GrammarError
from .lark_finite import check_finite
from .lark_json import inline_schemas
from .libraries import DEFAULT_LIBRARY, library_class
from .regex_check import check_regex
from .schema_check import check_json_schema
from .spec import Choice, Grammar, GrammarSpec, JsonObject, JsonSchema, Regex


def validate(spec: GrammarSpec, library: str | None = None, bounds: GenerationBounds = DEFAULT_BOUNDS) -> None:
    """Return if `library` (default llguidance) can enforce `spec` exactly, generated under `bounds`;
    raise GrammarError if not. What a library's check passed is remembered (`_PASSED`): agents send the same
    tools and schemas every turn, and llguidance takes ~0.2 ms a tool to check."""
    check_spec(spec)                        # first: it refuses a spec with unhashable fields (a list of options)
    name = library or DEFAULT_LIBRARY

    def library_check() -> bool:
        library_class(name).check(spec, bounds)
        return True

    if _text_size(spec) > _REMEMBERED_TEXT:
        library_check()
    else:                                   # a refusal raises and is not kept: it is checked again next time
        _PASSED.get_or_create((spec, name, bounds), library_check)


def check_spec(spec: GrammarSpec) -> None:
    """The library-neutral checks alone (microseconds: a schema's preparation is cached)."""
    check = _CHECKS.get(type(spec))
    if check is None:
        raise GrammarError(f"not a grammar spec: {type(spec).__name__}")
    check(spec)


_PASSED: LRUCache[bool] = LRUCache(1024)   # (spec, library, bounds) whose library check passed
_REMEMBERED_TEXT = 64 * 1024              # characters of the longest spec kept: the memo holds <= 64 MB of text


def _text_size(spec: GrammarSpec) -> int:
    """The characters a spec holds (its schema, pattern, options or grammar text)."""
    return sum(len(value) if isinstance(value, str) else sum(len(v) for v in value)
               for value in vars(spec).values())


def _check_schema(spec: JsonSchema) -> None:
    check_json_schema(spec.schema)


def _check_regex(spec: Regex) -> None:
    check_regex(spec.pattern)


def _check_choice(spec: Choice) -> None:
    if not isinstance(spec.options, tuple) or not spec.options:
        raise GrammarError("a choice needs at least one option")
    if not all(isinstance(option, str) and option for option in spec.options):
        raise GrammarError("choice options must be non-empty strings")


def _check_grammar(spec: Grammar) -> None:
    if not isinstance(spec.lark, str) or not spec.lark.strip():
        raise GrammarError("a grammar must be non-empty Lark text")
    check_finite(spec.lark)
    for _, _, schema in inline_schemas(spec.lark):  # each inline %json{...} is a schema like any other
        if isinstance(schema, dict):  # llguidance's layout options ride along; they are not JSON Schema
            schema = {key: value for key, value in schema.items() if key != "x-guidance"}
        check_json_schema(json.dumps(schema, ensure_ascii=False))


_CHECKS: dict[type, Callable[..., None]] = {
    JsonSchema: _check_schema,
    JsonObject: lambda spec: None,
    Regex: _check_regex,
    Choice: _check_choice,
    Grammar: _check_grammar,
}
