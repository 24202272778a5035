"""Local `$ref`s as JSON pointers, and pointers carried across a rewrite of the schema's keywords.

A local ref is `#`, `#/json/pointer` (its fragment percent-decoded, as URI fragments are), or the
root's own `$id` followed by one of those. Only pointers are supported: `#name` anchors are not.
"""

from __future__ import annotations

from typing import Any, Callable
from urllib.parse import unquote

Node = dict[str, Any]

# After these keywords the next pointer segment is a name (maps) or an index (lists), then a schema.
_MAP_KEYWORDS = frozenset({"properties", "patternProperties", "dependentSchemas", "dependencies",
                           "definitions", "$defs"})
_LIST_KEYWORDS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems", "items"})
_SCHEMA_KEYWORDS = frozenset({"additionalProperties", "items", "additionalItems", "not", "if", "then", "else",
                              "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties"})


def is_local_ref(ref: Any, root_id: str | None = None) -> bool:
    if not isinstance(ref, str):
        return False
    if root_id and ref.split("#", 1)[0] == root_id:
        return ref == root_id or ref[len(root_id)] == "#" and _is_pointer(ref[len(root_id) + 1:])
    return ref.startswith("#") and _is_pointer(ref[1:])


def _is_pointer(fragment: str) -> bool:
    return fragment == "" or fragment.startswith("/")


def local_pointer(ref: str, root_id: str | None = None) -> str:
    """The decoded JSON pointer of a local ref ("" for the root)."""
    if root_id and ref.startswith(root_id):
        ref = ref[len(root_id):]
    return unquote(ref.lstrip("#"))


def split_pointer(pointer: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]] if pointer else []


def join_pointer(parts: list[str]) -> str:
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


class RefTranslator:
    """Maps a pointer into the original schema to the same place after keywords were renamed.

    `rename(node, segment)` gives the new name of keyword `segment` in schema node `node`. Only
    segments in keyword position are renamed, never a property called "definitions".
    """

    def __init__(self, root: Node, rename: Callable[[Node, str], str], root_id: str | None) -> None:
        self.root, self.rename, self.root_id = root, rename, root_id

    def __call__(self, pointer: str) -> str:
        out, current, position = [], self.root, "schema"
        for part in split_pointer(pointer):
            if position == "schema" and isinstance(current, dict):
                out.append(self.rename(current, part))
                position = _after_keyword(part, current.get(part))
            else:
                out.append(part)
                position = "schema" if position in ("map", "list") else "data"
            current = _step(current, part)
        return join_pointer(out)


def _after_keyword(keyword: str, value: Any) -> str:
    if keyword in _MAP_KEYWORDS and isinstance(value, dict):
        return "map"
    if keyword in _LIST_KEYWORDS and isinstance(value, list):
        return "list"
    return "schema" if keyword in _SCHEMA_KEYWORDS else "data"


def _step(current: Any, part: str) -> Any:
    if isinstance(current, dict):
        return current.get(part)
    if isinstance(current, list) and part.isdigit() and int(part) < len(current):
        return current[int(part)]
    return None
