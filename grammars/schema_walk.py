"""Walking a JSON schema: every subschema with its JSON pointer, local `$ref`s, recursion."""

from __future__ import annotations

from typing import Any, Iterator

from .errors import GrammarError
from .schema_keywords import SUBSCHEMA, SUBSCHEMA_LISTS, SUBSCHEMA_MAPS

Node = dict[str, Any]


def iter_nodes(schema: Any, path: str = "") -> Iterator[tuple[str, Node]]:
    """Every object-valued subschema under the enforced keywords, as (JSON pointer, node).

    Boolean subschemas (`true`, `false`) carry no keywords and are skipped. Values of `enum`,
    `const`, `default` and `examples` are data, never walked.
    """
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key in SUBSCHEMA:
        if key in schema:
            yield from iter_nodes(schema[key], f"{path}/{_escape(key)}")
    for key in SUBSCHEMA_LISTS:
        for index, child in enumerate(_as_list(schema.get(key))):
            yield from iter_nodes(child, f"{path}/{key}/{index}")
    for key in SUBSCHEMA_MAPS:
        for name, child in _as_dict(schema.get(key)).items():
            yield from iter_nodes(child, f"{path}/{_escape(key)}/{_escape(name)}")


def resolve_ref(root: Node, ref: Any) -> Any:
    """The subschema a local `$ref` ("#", "#/$defs/x") points at; GrammarError otherwise."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise GrammarError(f"only local $ref ('#/...') is supported, not {ref!r}", "$ref")
    target: Any = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            raise GrammarError(f"$ref {ref!r} points at nothing in the schema", "$ref")
    return target


def is_recursive(root: Node) -> bool:
    """Whether following `$ref`s from some subschema can lead back into itself."""
    refs = [(path, node["$ref"]) for path, node in iter_nodes(root) if isinstance(node.get("$ref"), str)]
    # Edge a -> b when ref b sits inside the subtree that ref a points at.
    targets = {path: _pointer(ref) for path, ref in refs}
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


def _pointer(ref: str) -> str:
    return ref[1:] if ref.startswith("#") else ref


def _inside(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/") or prefix == ""


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
