"""Refusing a schema some of whose `$ref`s can never end: `{"$ref": "#"}`, or a definition that must contain itself.

Such a subschema has no finite instance, so its grammar has a state that allows no token at all
(a sampler would mask the whole vocabulary). The check is a least fixpoint over the reachable `$ref`
targets: a target is finite once some instance of it is built from finite parts only. An object
needs its required properties, an array its first `minItems` items, `allOf` every branch, `anyOf`
and `oneOf` one branch; a scalar type is always finite. Any type the node allows will do.
"""

from __future__ import annotations

from typing import Any

from .errors import GrammarError
from .schema_walk import Node, iter_reachable, ref_pointer

_OBJECT_KEYWORDS = ("properties", "required", "additionalProperties")
_ARRAY_KEYWORDS = ("items", "prefixItems", "minItems")


def check_finite(root: Node) -> None:
    targets = sorted({ref_pointer(node["$ref"]) for _, node in iter_reachable(root) if "$ref" in node})
    nodes = dict(iter_reachable(root))
    finite: set[str] = set()
    changed = True
    while changed:
        changed = False
        for pointer in targets:
            if pointer not in finite and _finite(nodes[pointer], finite):
                finite.add(pointer)
                changed = True
    for pointer in targets:
        if pointer not in finite:
            where = pointer or "/"
            raise GrammarError(f"the $ref cycle through '{where}' never ends: no finite JSON value matches it", "$ref")


def _finite(node: Any, finite: set[str]) -> bool:
    if not isinstance(node, dict):
        return node is not False
    if "$ref" in node and ref_pointer(node["$ref"]) not in finite:
        return False
    if not all(_finite(branch, finite) for branch in node.get("allOf", [])):
        return False
    for key in ("anyOf", "oneOf"):
        if key in node and not any(_finite(branch, finite) for branch in node[key]):
            return False
    return any(_TYPE_FINITE.get(kind, _scalar)(node, finite) for kind in _types(node))


def _types(node: Node) -> list[str]:
    kinds = node.get("type")
    if isinstance(kinds, str):
        return [kinds]
    if isinstance(kinds, list):
        return kinds
    inferred = [kind for kind, keys in (("object", _OBJECT_KEYWORDS), ("array", _ARRAY_KEYWORDS))
                if any(key in node for key in keys)]
    return inferred or ["any"]


def _object(node: Node, finite: set[str]) -> bool:
    properties = node.get("properties", {})
    fallback = node.get("additionalProperties", True)
    return all(_finite(properties.get(name, fallback), finite) for name in node.get("required", []))


def _array(node: Node, finite: set[str]) -> bool:
    prefix, needed = node.get("prefixItems", []), node.get("minItems", 0)
    if not all(_finite(item, finite) for item in prefix[:needed]):
        return False
    return needed <= len(prefix) or _finite(node.get("items", True), finite)


def _scalar(node: Node, finite: set[str]) -> bool:
    return True


_TYPE_FINITE = {"object": _object, "array": _array}
