"""Which JSON schemas outlines-core turns into a regex that enforces them exactly.

outlines-core builds one regex per schema node from the *first* of a fixed list of keywords it
finds (properties, allOf, anyOf, oneOf, prefixItems, enum, const, $ref, type) and drops the rest
without a word; it pastes `pattern` and some `format` regexes into JSON text raw, and it cuts
recursion at depth 3. Each rule below refuses a schema where that would let an invalid output by.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import GrammarError
from ..regex_check import may_produce
from ..schema_walk import Node, is_recursive, iter_nodes

# Keywords outlines-core never enforces.
UNENFORCED = frozenset({"allOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
# Formats whose outlines-core regex yields only valid, JSON-safe instances (date-time and time
# allow no UTC offset; email and uri can produce quotes inside the JSON string; date's \d admits
# any Unicode digit).
FORMATS = frozenset({"uuid"})
# The keyword that decides how outlines-core reads a node, in its order, and what it reads with it.
DISPATCH: tuple[tuple[str, frozenset[str]], ...] = (
    ("properties", frozenset({"properties", "required", "additionalProperties", "type"})),
    ("anyOf", frozenset({"anyOf"})),
    ("oneOf", frozenset({"oneOf"})),
    ("prefixItems", frozenset({"prefixItems", "items", "type"})),
    ("enum", frozenset({"enum", "type"})),
    ("const", frozenset({"const", "type"})),
    ("$ref", frozenset({"$ref"})),
)
BY_TYPE = frozenset(
    {"type", "minLength", "maxLength", "pattern", "format", "items", "minItems", "maxItems", "additionalProperties"}
)
_CONTAINERS = frozenset({"$defs", "definitions"})
_JSON_UNSAFE = '"\\' + "".join(chr(code) for code in range(0x20))


def check_outlines_schema(schema: Node) -> None:
    """GrammarError naming the keyword if outlines-core would not enforce `schema` exactly."""
    if is_recursive(schema):
        raise GrammarError("outlines-core cuts recursive '$ref' at depth 3; use llguidance or xgrammar", "$ref")
    for path, node in iter_nodes(schema):
        _check_node(path or "/", node)


def _check_node(path: str, node: Node) -> None:
    for keyword in node:
        if keyword in UNENFORCED:
            raise GrammarError(f"outlines-core does not enforce {keyword!r} (at '{path}')", keyword)
    read = _read_keywords(node)
    for keyword in node:
        if keyword not in read and keyword not in _CONTAINERS:
            raise GrammarError(f"outlines-core ignores {keyword!r} next to the other keywords at '{path}'", keyword)
    _check_strings(path, node)
    _check_names(path, node)


def _read_keywords(node: Node) -> frozenset[str]:
    for keyword, read in DISPATCH:
        if keyword in node:
            return read
    return BY_TYPE


def _check_strings(path: str, node: Node) -> None:
    fmt, pattern = node.get("format"), node.get("pattern")
    if fmt is not None and fmt not in FORMATS:
        raise GrammarError(f"outlines-core cannot enforce format {fmt!r} (at '{path}')", "format")
    if pattern is not None and may_produce(pattern, _JSON_UNSAFE):
        raise GrammarError(
            f"outlines-core cannot enforce 'pattern' {pattern!r}: it may produce quotes, backslashes or control "
            f"characters (at '{path}')",
            "pattern",
        )
    if isinstance(pattern, str) and pattern.startswith("^") != pattern.endswith("$"):
        raise GrammarError(f"outlines-core cannot enforce a partly anchored 'pattern' {pattern!r} (at '{path}')",
                           "pattern")
    sized = "minLength" in node or "maxLength" in node
    if sum((sized, fmt is not None, pattern is not None)) > 1:
        raise GrammarError(f"outlines-core enforces only one of length, 'pattern', 'format' (at '{path}')", "pattern")


def _check_names(path: str, node: Node) -> None:
    properties: dict[str, Any] = node.get("properties", {}) if isinstance(node.get("properties"), dict) else {}
    for name in properties:
        if json.dumps(name, ensure_ascii=False)[1:-1] != name:
            raise GrammarError(f"outlines-core cannot enforce property name {name!r} (needs escaping)", "properties")
    if any(value is False for value in properties.values()):
        raise GrammarError(f"outlines-core cannot read a 'false' property schema (at '{path}')", "properties")
    missing = [name for name in node.get("required", []) if name not in properties]
    if missing:
        raise GrammarError(
            f"outlines-core ignores 'required' names not in 'properties': {missing} (at '{path}')", "required"
        )
