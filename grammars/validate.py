"""`validate(spec)`: the up-front check the server runs before a request queues.

Fast and tokenizer-free: it never compiles. Two layers, in order: library-neutral checks (the
schema parses, is valid JSON Schema, uses only enforced keywords; the regex parses; the choice
is non-empty; the grammar is text), then the chosen library's own `check`, which refuses what
that library cannot enforce exactly. Everything it refuses is a GrammarError: a 400 at the edge.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Callable

from .bounds import DEFAULT_BOUNDS, GenerationBounds
from .errors import GrammarError
from .lark_json import inline_schemas
from .libraries import DEFAULT_LIBRARY, library_class
from .regex_check import check_regex
from .schema_check import check_json_schema
from .spec import Choice, Grammar, GrammarSpec, JsonObject, JsonSchema, Regex


def validate(spec: GrammarSpec, library: str | None = None, bounds: GenerationBounds = DEFAULT_BOUNDS) -> None:
    """Return if `library` (default llguidance) can enforce `spec` exactly, generated under `bounds`;
    raise GrammarError if not. A spec that passed is remembered (`_Passed`): agents send the same tools and
    schemas with every turn, and 20 tools cost ~4 ms to check."""
    check_spec(spec)                        # first: it refuses a spec with unhashable fields (a list of options)
    key = (spec, library or DEFAULT_LIBRARY, bounds)
    if _PASSED.seen(key):
        return
    library_class(key[1]).check(spec, bounds)
    _PASSED.add(key, _text_size(spec))


def check_spec(spec: GrammarSpec) -> None:
    """The library-neutral checks alone (microseconds: a schema's preparation is cached)."""
    check = _CHECKS.get(type(spec))
    if check is None:
        raise GrammarError(f"not a grammar spec: {type(spec).__name__}")
    check(spec)


class _Passed:
    """An LRU of (spec, library, bounds) that validated, thread-safe (validate runs on worker threads).
    Refusals are not kept: a spec is refused again by the same checks. A spec longer than `max_text`
    characters is not kept, which bounds the memory to entries x max_text."""

    def __init__(self, entries: int = 1024, max_text: int = 64 * 1024) -> None:
        self.entries, self.max_text = entries, max_text
        self._keys: OrderedDict[tuple, None] = OrderedDict()
        self._lock = threading.Lock()

    def seen(self, key: tuple) -> bool:
        with self._lock:
            if key in self._keys:
                self._keys.move_to_end(key)
                return True
        return False

    def clear(self) -> None:
        with self._lock:
            self._keys.clear()

    def add(self, key: tuple, text: int) -> None:
        if text > self.max_text:
            return
        with self._lock:
            self._keys[key] = None
            if len(self._keys) > self.entries:
                self._keys.popitem(last=False)


_PASSED = _Passed()


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
