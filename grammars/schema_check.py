"""Up-front checks of a JSON schema, and its prepared form: valid in its dialect, normalized, enforceable.

Fast by design (no tokenizer, no compilation): a request with a bad schema is refused before it
queues. The order is the order of the messages a user sees: malformed text, an unsupported
dialect, the first refused validation keyword among the subschemas an instance can reach (paths
are given in 2020-12 spelling: `definitions` reads `$defs`), an invalid schema (its own dialect's
meta-schema), then a `$ref` cycle that never ends.
Annotations, unknown keywords and unknown formats never get this far (grammars/dialects.py).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Callable

from .dialects import Dialect, client_spelling, dialect_of, normalize
from .errors import GrammarError
from .regex_check import check_regex
from .schema_finite import check_finite
from .schema_keywords import REFUSED
from .schema_walk import Node, iter_nodes, iter_reachable, map_nodes, prune_definitions, ref_pointer
from .spec import canonical_json


def check_json_schema(text: str) -> None:
    """Return if the schema text passes every check; raise GrammarError otherwise."""
    prepared_schema(text)


@lru_cache(maxsize=1024)  # a pure function of the text; meta-schema validation costs ~0.2 ms per subschema
def prepared_schema(text: str) -> str:
    """The schema as draft 2020-12 JSON text, annotations and unused definitions dropped; GrammarError
    (never cached) if it cannot be enforced exactly."""
    schema = _parse(text)
    dialect = dialect_of(schema)
    normalized = normalize(schema, dialect)
    used = set()
    for path, node in iter_reachable(normalized):  # cheap, and robust to malformed values
        try:
            _check_node(path, node)
        except GrammarError as exc:
            raise _as_written(exc, schema, dialect, path) from None
        if "$ref" in node:
            used.add(ref_pointer(node["$ref"]))
    _check_meta_schema(schema, dialect)  # seconds on a megabyte schema, so after the cheap refusals
    check_finite(normalized)
    return canonical_json(map_nodes(prune_definitions(normalized, used), _without_id))


def _parse(text: str) -> Node:
    try:
        schema = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise GrammarError(f"the schema is not valid JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise GrammarError("a JSON schema must be a JSON object")
    return schema


def _check_meta_schema(schema: Node, dialect: Dialect) -> None:
    try:
        dialect.validator.check_schema(schema)
    except Exception as exc:  # jsonschema.SchemaError, or a referencing error inside the meta-schema
        path = list(getattr(exc, "path", []))
        where = "/".join(str(part) for part in path)
        keyword = next((p for p in reversed(path) if isinstance(p, str) and p in dialect.keywords), None)
        message = getattr(exc, "message", str(exc))
        raise GrammarError(f"invalid JSON Schema ({dialect.name}) at '/{where}': {message}", keyword) from None


def _check_node(path: str, node: Node) -> None:
    for keyword, value in node.items():
        if keyword in REFUSED and not (keyword == "$id" and not _moves_refs(path, node)):
            raise GrammarError(f"unsupported JSON Schema keyword {keyword!r} at '{path or '/'}'", keyword)
        check = _VALUE_CHECKS.get(keyword)
        if check is not None:
            check(path, value)


def _as_written(exc: GrammarError, schema: Node, dialect: Dialect, path: str) -> GrammarError:
    """The refusal with the path and keyword spelled as the client wrote them (draft-04's `definitions`,
    draft-07's `dependencies`), not as normalized."""
    where, keyword = client_spelling(schema, dialect, path, exc.keyword)
    message = exc.message.replace(f"'{path or '/'}'", f"'{where or '/'}'")
    if keyword != exc.keyword and exc.keyword is not None:
        message = message.replace(repr(exc.keyword), repr(keyword), 1)
    return GrammarError(message, keyword)


def _moves_refs(path: str, node: Node) -> bool:
    """Whether a `$id` here changes what a `$ref` means: below the root, with a `$ref` under it."""
    return bool(path) and any("$ref" in child for _, child in iter_nodes(node))


def _without_id(node: Node, path: str) -> Node:
    return {k: v for k, v in node.items() if k != "$id"}  # every $ref is a pointer from the root by now


def _check_pattern(path: str, value: Any) -> None:
    check_regex(value, "pattern")


def _check_pattern_properties(path: str, value: Any) -> None:
    for pattern in value if isinstance(value, dict) else ():     # the meta-schema check refuses a non-object
        check_regex(pattern, "patternProperties")


_VALUE_CHECKS: dict[str, Callable[[str, Any], None]] = {
    "pattern": _check_pattern,
    "patternProperties": _check_pattern_properties,
}
