"""`oneOf` made provably exclusive for generation, in the common real-world shapes.

The grammar libraries enforce `oneOf` only where they can prove that no value matches two branches
(llguidance: branches of different types, or objects told apart by a const/enum property or by
required properties that the other branches forbid). Real schemas often say the same less directly,
so each `oneOf` is rewritten, every step a narrowing of one branch (a value of a narrowed branch
still matches that branch, and still fails the others, so the output stays valid):
- a branch that is only a `$ref` is replaced by what it points at (libraries look no further);
- when every branch has object (array) keywords or that type, each gets `"type": "object"` (`"array"`);
- when every branch is an object with `required` names that each other branch lacks, each branch
  forbids the others' names (`"properties": {"other": false}`), so a value can only match one.
What is still not provable (integer vs number, two strings) is refused by the library, naming `oneOf`.
"""

from __future__ import annotations

from typing import Any

from .schema_walk import Node, map_nodes, resolve_ref

_OBJECT = ("properties", "required", "additionalProperties")
_ARRAY = ("items", "prefixItems", "minItems", "maxItems")
_MAX_REF_CHAIN = 8


def inline_one_of(schema: Node) -> Node:
    """Each oneOf's `$ref` branches inlined and typed (before objects are closed)."""
    def rewrite(node: Node, path: str) -> Node:
        if not isinstance(node.get("oneOf"), list):
            return node
        branches = [_inlined(branch, schema) for branch in node["oneOf"]]
        typed = [_typed(branch) for branch in branches]
        if len({_type_of(branch) for branch in typed}) == 1:  # see _typed
            branches = typed
        return {**node, "oneOf": branches}

    return map_nodes(schema, rewrite)


def forbid_one_of(schema: Node) -> Node:
    """Each oneOf's object branches told apart by their required names (after objects are closed)."""
    def rewrite(node: Node, path: str) -> Node:
        if not isinstance(node.get("oneOf"), list):
            return node
        return {**node, "oneOf": _forbid_others(node["oneOf"])}

    return map_nodes(schema, rewrite)


def _inlined(branch: Any, root: Node) -> Any:
    for _ in range(_MAX_REF_CHAIN):
        if not (isinstance(branch, dict) and set(branch) == {"$ref"}):
            break
        branch = resolve_ref(root, branch["$ref"])
    return branch


def _type_of(branch: Any) -> Any:
    return branch.get("type") if isinstance(branch, dict) and isinstance(branch.get("type"), str) else None


def _typed(branch: Any) -> Any:
    """`branch` with the type its keywords imply. Only safe when every branch gets the same type: an
    untyped object branch also matches every string, so typing it while a string branch exists would
    let that branch's strings match two branches."""
    if not isinstance(branch, dict) or "type" in branch or "enum" in branch or "const" in branch:
        return branch
    for kind, keys in (("object", _OBJECT), ("array", _ARRAY)):
        if any(key in branch for key in keys):
            return {**branch, "type": kind}
    return branch


def _forbid_others(branches: list[Any]) -> list[Any]:
    maybe_required = [_required_of_object(branch) for branch in branches]
    required = [names for names in maybe_required if names is not None]
    if len(branches) < 2 or len(required) < len(branches):
        return branches
    if any(not (other - mine) for i, mine in enumerate(required) for j, other in enumerate(required) if i != j):
        return branches  # some branch requires nothing another lacks: not told apart this way
    out = []
    for branch, mine in zip(branches, required, strict=True):
        declared = branch.get("properties", {})
        others = [name for name in sorted(set().union(*required) - mine)
                  if name in declared or branch.get("additionalProperties", True) is not False]
        out.append({**branch, "properties": {**declared, **{name: False for name in others}}} if others else branch)
    return out


def _required_of_object(branch: Any) -> set[str] | None:
    if not isinstance(branch, dict) or branch.get("type") != "object" or not branch.get("required"):
        return None
    return set(branch["required"])
