"""A bound on `$ref` recursion in the generation form, like the bounds on array lengths (grammars/bounds.py).

A recursive schema (a tree of nodes, a linked list) lets a small model nest until `max_tokens`, and the
output never closes. For generation only, every `$ref` that lies on a cycle is unrolled `max_ref_depth`
times: a ref to a cyclic target points at that target's copy one level deeper (`$defs/conch-depth-K-I`), and
the deepest copies' refs to cyclic targets are `false`, so there the target's own non-recursive alternatives
are all that is left (a `null` child, an empty list). Every output still validates against the user's
schema: each copy is the target itself, only with fewer ways to go deeper.
"""

from __future__ import annotations

from typing import Any

from .schema_keywords import CONTAINERS
from .schema_walk import Node, iter_nodes, map_nodes, ref_pointer, resolve_ref

_COPIES = "conch-depth-{depth}-{index}"


def bound_recursion(schema: Node, depth: int | None) -> Node:
    """`schema` with its recursive `$ref`s unrolled `depth` times (unchanged if none, or `depth` is None)."""
    cyclic = cyclic_targets(schema) if depth else []
    if not cyclic:
        return schema
    assert depth is not None
    copies: dict[str, Any] = {}
    for level in range(1, depth + 1):
        deeper = level + 1 if level < depth else None
        for index, target in enumerate(cyclic):
            body = {k: v for k, v in resolve_ref(schema, "#" + target).items() if k not in CONTAINERS}
            copies[_COPIES.format(depth=level, index=index)] = _redirect(body, cyclic, deeper)
    root = _redirect(schema, cyclic, 1)
    return {**root, "$defs": {**root.get("$defs", {}), **copies}}


def cyclic_targets(schema: Node) -> list[str]:
    """Pointers that a `$ref` chain starting inside them can lead back to, in a stable order."""
    targets = {path: ref_pointer(node["$ref"])
               for path, node in iter_nodes(schema) if isinstance(node.get("$ref"), str)}
    edges = {a: [b for b in targets if _inside(b, targets[a])] for a in targets}
    on_cycle = [a for a in targets if _reaches(a, edges)]
    return sorted({targets[a] for a in on_cycle})


def _redirect(node: Node, cyclic: list[str], depth: int | None) -> Any:
    def point(child: Node, path: str) -> Any:
        ref = child.get("$ref")
        if not isinstance(ref, str) or ref_pointer(ref) not in cyclic:
            return child
        if depth is None:
            return False                                  # the deepest level: no way further down
        index = cyclic.index(ref_pointer(ref))
        return {**child, "$ref": f"#/$defs/{_COPIES.format(depth=depth, index=index)}"}

    return map_nodes(node, point)


def _reaches(start: str, edges: dict[str, list[str]]) -> bool:
    seen, stack = set(), list(edges[start])
    while stack:
        current = stack.pop()
        if current == start:
            return True
        if current not in seen:
            seen.add(current)
            stack.extend(edges[current])
    return False


def _inside(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/") or prefix == ""
