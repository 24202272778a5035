"""Walking a normalized JSON schema: every subschema with its JSON pointer, local `$ref`s, rebuilding."""

from __future__ import annotations

from typing import Any, Callable, Iterator

from .errors import GrammarError
from .schema_keywords import CONTAINERS, SUBSCHEMA, SUBSCHEMA_LISTS, SUBSCHEMA_MAPS
from .schema_pointer import join_pointer, split_pointer

Node = dict[str, Any]


def children(node: Node, path: str, containers: bool = True) -> Iterator[tuple[str, Any]]:
    """(pointer, subschema) of each direct subschema of `node` (at `path`), $defs too unless told not."""
    for key in SUBSCHEMA:
        if key in node:
            yield f"{path}/{key}", node[key]
    for key in SUBSCHEMA_LISTS:
        for index, child in enumerate(_as_list(node.get(key))):
            yield f"{path}/{key}/{index}", child
    for key in SUBSCHEMA_MAPS:
        if containers or key not in CONTAINERS:
            for name, child in _as_dict(node.get(key)).items():
                yield f"{path}/{_escape(key)}/{_escape(name)}", child


def iter_nodes(schema: Any, path: str = "") -> Iterator[tuple[str, Node]]:
    """Every object-valued subschema, as (JSON pointer, node). Boolean subschemas are skipped;
    values of `enum`, `const` and of unknown keywords are data, never walked."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for child_path, child in children(schema, path):
        yield from iter_nodes(child, child_path)


def iter_reachable(root: Node) -> Iterator[tuple[str, Node]]:
    """Every subschema an instance can meet: from the root, into `$ref` targets, never into unused $defs.

    Each node once, under its own pointer; a `$ref` that is not local or points at nothing raises."""
    seen: set[str] = set()
    stack: list[tuple[str, Any]] = [("", root)]
    while stack:
        path, node = stack.pop()
        if path in seen or not isinstance(node, dict):
            continue
        seen.add(path)
        yield path, node
        if "$ref" in node:
            stack.append((ref_pointer(node["$ref"]), resolve_ref(root, node["$ref"])))
        stack.extend(reversed(list(children(node, path, containers=False))))


def ref_pointer(ref: Any) -> str:
    if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
        raise GrammarError(f"only local $ref ('#/...') is supported, not {ref!r}", "$ref")
    return ref[1:]


def resolve_ref(root: Node, ref: Any) -> Any:
    """The subschema a local `$ref` ("#", "#/$defs/x") points at; GrammarError otherwise."""
    target: Any = root
    for part in split_pointer(ref_pointer(ref)):
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            raise GrammarError(f"$ref {ref!r} points at nothing in the schema", "$ref")
    return target


def map_nodes(schema: Any, transform: Callable[[Node, str], Node], path: str = "") -> Any:
    """The schema rebuilt bottom-up, each object node replaced by transform(node with new children, path)."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in SUBSCHEMA:
        if key in out:
            out[key] = map_nodes(out[key], transform, f"{path}/{key}")
    for key in SUBSCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [map_nodes(child, transform, f"{path}/{key}/{i}") for i, child in enumerate(out[key])]
    for key in SUBSCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: map_nodes(child, transform, f"{path}/{_escape(key)}/{_escape(name)}")
                        for name, child in out[key].items()}
    return transform(out, path)


def prune_definitions(root: Node, used: set[str]) -> Node:
    """`root` without the $defs/definitions entries that no pointer in `used` points into."""
    def keep(node: Node, path: str) -> Node:
        for key in CONTAINERS & node.keys():
            prefix = f"{path}/{key}/"
            kept = {name: child for name, child in _as_dict(node[key]).items()
                    if any(p == prefix + _escape(name) or p.startswith(prefix + _escape(name) + "/") for p in used)}
            node = {k: v for k, v in node.items() if k != key} | ({key: kept} if kept else {})
        return node

    return map_nodes(root, keep)


def is_recursive(root: Node) -> bool:
    """Whether following `$ref`s from some subschema can lead back into itself."""
    refs = [(path, node["$ref"]) for path, node in iter_nodes(root) if isinstance(node.get("$ref"), str)]
    # Edge a -> b when ref b sits inside the subtree that ref a points at.
    targets = {path: ref_pointer(ref) for path, ref in refs}
    edges = {a: [b for b in targets if _inside(b, targets[a])] for a in targets}
    return any(_reaches(start, start, edges, set()) for start in edges)


def _reaches(start: str, current: str, edges: dict[str, list[str]], seen: set[str]) -> bool:
    for nxt in edges[current]:
        if nxt == start:
            return True
        if nxt not in seen:
            seen.add(nxt)
            if _reaches(start, nxt, edges, seen):
                return True
    return False


def _inside(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/") or prefix == ""


def _escape(name: str) -> str:
    return join_pointer([name])[1:]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
