"""Up-front checks of a JSON schema: it parses, it is valid JSON Schema, it uses only what Conch enforces.

Fast by design (no tokenizer, no compilation): a request with a bad schema is refused before it
queues. The order is the order of the messages a user sees: malformed text, then an invalid
schema, then the first unsupported keyword, depth first.
"""

from __future__ import annotations

import json
import numbers
from functools import lru_cache
from typing import Any, Callable

import jsonschema

from .errors import GrammarError
from .regex_check import check_regex
from .schema_keywords import ALLOWED, DIALECTS, FORMATS
from .schema_walk import Node, iter_nodes, resolve_ref


@lru_cache(maxsize=1024)  # a pure function of the text; meta-schema validation costs ~0.2 ms per subschema
def check_json_schema(text: str) -> None:
    """Return if the schema text passes every check; raise GrammarError (never cached) otherwise."""
    schema = _parse(text)
    _check_dialect(schema)
    _check_meta_schema(schema)
    for path, node in iter_nodes(schema):
        _check_node(schema, path, node)


def _parse(text: str) -> Node:
    try:
        schema = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise GrammarError(f"the schema is not valid JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise GrammarError("a JSON schema must be a JSON object")
    return schema


def _check_dialect(schema: Node) -> None:
    dialect = schema.get("$schema")
    if dialect is not None and dialect not in DIALECTS:
        raise GrammarError(f"unsupported JSON Schema dialect {dialect!r} (use 2020-12)", "$schema")


def _check_meta_schema(schema: Node) -> None:
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(part) for part in exc.path)
        keyword = next((p for p in reversed(exc.path) if isinstance(p, str) and p in ALLOWED), None)
        raise GrammarError(f"invalid JSON Schema at '/{where}': {exc.message}", keyword) from None


def _check_node(root: Node, path: str, node: Node) -> None:
    for keyword, value in node.items():
        if keyword not in ALLOWED:
            raise GrammarError(f"unsupported JSON Schema keyword {keyword!r} at '{path or '/'}'", keyword)
        check = _VALUE_CHECKS.get(keyword)
        if check is not None:
            check(root, path, value)


def _check_format(root: Node, path: str, value: Any) -> None:
    if value not in FORMATS:
        raise GrammarError(f"unsupported JSON Schema format {value!r} at '{path or '/'}'", "format")


def _check_pattern(root: Node, path: str, value: Any) -> None:
    check_regex(value, "pattern")


def _check_ref(root: Node, path: str, value: Any) -> None:
    resolve_ref(root, value)


def _check_items(root: Node, path: str, value: Any) -> None:
    if isinstance(value, list):  # draft-07 tuple form; 2020-12 spells it prefixItems
        raise GrammarError(f"'items' as an array is not supported at '{path or '/'}'; use 'prefixItems'", "items")


def _check_bound(keyword: str) -> Callable[[Node, str, Any], None]:
    def check(root: Node, path: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, numbers.Number):  # draft-04 booleans
            raise GrammarError(f"'{keyword}' must be a number at '{path or '/'}'", keyword)

    return check


def _check_id(root: Node, path: str, value: Any) -> None:
    if path:  # a nested $id would move the base of every $ref below it
        raise GrammarError(f"'$id' is only supported at the root, not at '{path}'", "$id")


_VALUE_CHECKS: dict[str, Callable[[Node, str, Any], None]] = {
    "format": _check_format,
    "pattern": _check_pattern,
    "$ref": _check_ref,
    "items": _check_items,
    "exclusiveMinimum": _check_bound("exclusiveMinimum"),
    "exclusiveMaximum": _check_bound("exclusiveMaximum"),
    "$id": _check_id,
}
