"""The form of a prepared schema that is compiled: closed objects and bounded strings, arrays and numbers.

Every value this form allows is valid under the prepared schema (each change only narrows it):
- each `oneOf` is made provably exclusive where its branches are told apart (one_of.py);
- an object node with `properties`, no `additionalProperties` and every `required` name declared
  is closed to its properties (so, like every closed object, it never repeats a key), unless it is
  merged with other object schemas: a node with `allOf`/`anyOf`/`oneOf`/`$ref` beside its own
  keywords, a branch of `allOf` (or of a union beside object keywords), and whatever a `$ref` in
  such a place points at stay open, since closing one part would forbid the others' properties;
- a string with no maxLength, enum, const, pattern or format gets `maxLength`;
- an array with no maxItems (and no prefixItems) gets `maxItems`;
- an open object (undeclared keys allowed) with no maxProperties, whose declared properties are all
  required (where llguidance can count keys), gets `maxProperties`: its properties plus `max_extra_keys`,
  so a model that repeats a key closes the object instead of looping to max_tokens (for the others,
  the key check beside the grammar bounds them: json_keys.py);
- an integer or number with no lower (upper) bound gets one `max_integer_digits` digits away;
  a number with no multipleOf gets `multipleOf: 10**-max_fraction_digits`;
- a `$ref` on a cycle is unrolled `max_ref_depth` times (recursion.py), so nesting ends.
"""

from __future__ import annotations

import json
from decimal import Decimal
from functools import lru_cache
from typing import Any

from .bounds import GenerationBounds
from .one_of import forbid_one_of, inline_one_of
from .recursion import bound_recursion
from .schema_walk import Node, iter_nodes, map_nodes, ref_pointer

_MERGING = ("allOf", "anyOf", "oneOf", "$ref")
_OBJECT = ("properties", "required", "additionalProperties")


@lru_cache(maxsize=1024)
def generation_text(prepared: str, bounds: GenerationBounds) -> str:
    """generation_schema on prepared schema text, as compact JSON text."""
    schema = generation_schema(json.loads(prepared), bounds)
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


def generation_schema(schema: Node, bounds: GenerationBounds) -> Node:
    schema = inline_one_of(schema)
    merged = _merged_paths(schema) if bounds.close_objects else set()

    def narrow(node: Node, path: str) -> Node:
        if bounds.close_objects and path not in merged and _closable(node):
            node = {**node, "additionalProperties": False}
        return _bounded(node, bounds)

    return bound_recursion(forbid_one_of(map_nodes(schema, narrow)), bounds.max_ref_depth)


def _closable(node: Node) -> bool:
    properties = node.get("properties")
    return (isinstance(properties, dict) and "additionalProperties" not in node
            and not any(key in node for key in _MERGING)
            and all(name in properties for name in node.get("required", [])))


def _merged_paths(schema: Node) -> set[str]:
    """Pointers of the nodes that are merged with others (see the module docstring)."""
    merged: set[str] = set()
    refs: dict[str, str] = {}
    for path, node in iter_nodes(schema):
        if "$ref" in node:
            refs[path] = ref_pointer(node["$ref"])
            if len(node.keys() - {"$ref", "$defs", "definitions"}) > 0:
                merged.add(refs[path])
        merged.update(f"{path}/allOf/{i}" for i in range(len(node.get("allOf", []))))
        if any(key in node for key in _OBJECT):
            for key in ("anyOf", "oneOf"):
                merged.update(f"{path}/{key}/{i}" for i in range(len(node.get(key, []))))
    frontier = list(merged)
    while frontier:  # a merged $ref passes it on to its target
        target = refs.get(frontier.pop())
        if target is not None and target not in merged:
            merged.add(target)
            frontier.append(target)
    return merged


def _types(node: Node) -> set[str]:
    kinds = node.get("type")
    return {kinds} if isinstance(kinds, str) else set(kinds) if isinstance(kinds, list) else set()


def _bounded(node: Node, bounds: GenerationBounds) -> Node:
    kinds = _types(node)
    if not kinds or "enum" in node or "const" in node:
        return node
    out = dict(node)
    if "string" in kinds and bounds.max_string_length and not out.keys() & {"maxLength", "pattern", "format"}:
        out["maxLength"] = max(bounds.max_string_length, out.get("minLength", 0))
    if "array" in kinds and bounds.max_items and not out.keys() & {"maxItems", "prefixItems"}:
        out["maxItems"] = max(bounds.max_items, out.get("minItems", 0))
    if "object" in kinds and bounds.max_extra_keys and _countable(out):
        declared = len(out.get("properties", {}))
        out["maxProperties"] = max(declared + bounds.max_extra_keys, out.get("minProperties", 0))
    if kinds & {"integer", "number"} and bounds.max_integer_digits:
        _bound_range(out, 10 ** bounds.max_integer_digits - 1)
    if "number" in kinds and bounds.max_fraction_digits and "multipleOf" not in out:
        out["multipleOf"] = float(Decimal(1).scaleb(-bounds.max_fraction_digits))
    return out


def _countable(node: Node) -> bool:
    """An open object whose keys llguidance can count: every declared property required, no union beside."""
    properties = node.get("properties", {})
    return (node.get("additionalProperties", True) is not False and "maxProperties" not in node
            and isinstance(properties, dict) and set(properties) <= set(node.get("required", []))
            and not any(key in node for key in _MERGING) and "patternProperties" not in node)


def _bound_range(node: Node, span: int) -> None:
    low = _first(node, "minimum", "exclusiveMinimum")
    high = _first(node, "maximum", "exclusiveMaximum")
    if low is None:
        node["minimum"] = min(-span, high - span) if high is not None else -span
    if high is None:
        node["maximum"] = max(span, low + span) if low is not None else span


def _first(node: Node, *keys: str) -> Any:
    values = [node[key] for key in keys if isinstance(node.get(key), (int, float)) and not isinstance(node[key], bool)]
    return values[0] if values else None
