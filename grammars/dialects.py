"""The JSON Schema dialects Conch reads, and each one's schema rewritten into draft 2020-12 terms.

A schema's dialect is its root `$schema` (2020-12 when absent or not one of these). Normalizing
changes spelling, never meaning. Every keyword the dialect does not define for
validation (annotations, vendor `x-*` extensions, typos, another draft's keywords) is dropped, as a
validator ignores it; then schema_vocabulary.py drops what is a no-op. The rewrites: draft-04's boolean
`exclusiveMinimum`/`exclusiveMaximum` become numeric bounds, `id` becomes `$id`, `definitions` becomes
`$defs` (and the `$ref` pointers into it follow), `dependencies` splits into `dependentRequired`/
`dependentSchemas`, an `items` array becomes `prefixItems` (with `additionalItems` as `items`), and up to
draft-07 the siblings of a `$ref` are dropped, as those drafts say they are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

import jsonschema
from jsonschema.protocols import Validator

from .errors import GrammarError
from .schema_pointer import RefTranslator, is_local_ref, join_pointer, local_pointer, split_pointer
from .schema_vocabulary import clean_node

Node = dict[str, Any]


@dataclass(frozen=True)
class Dialect:
    name: str
    validator: type[Validator]  # jsonschema's validator class for the dialect (meta-schema, keyword set)
    boolean_exclusive: bool = False  # draft-04: exclusiveMinimum/Maximum are flags on minimum/maximum
    id_keyword: str = "$id"
    ref_overrides: bool = False  # up to draft-07: a $ref's siblings are ignored
    items_array: bool = True  # up to 2019-09: `items` may be an array (the tuple form)

    @cached_property
    def keywords(self) -> frozenset[str]:
        """The keywords kept when reading this dialect: what validates, plus the places refs point into."""
        validating = frozenset(self.validator.VALIDATORS)
        branches = frozenset({"then", "else"}) if "if" in validating else frozenset()
        flags = frozenset({"exclusiveMinimum", "exclusiveMaximum"}) if self.boolean_exclusive else frozenset()
        return validating | branches | flags | frozenset({"definitions", "$defs", self.id_keyword})


DRAFT_04 = Dialect("draft-04", jsonschema.Draft4Validator, boolean_exclusive=True, id_keyword="id",
                   ref_overrides=True)
DRAFT_06 = Dialect("draft-06", jsonschema.Draft6Validator, ref_overrides=True)
DRAFT_07 = Dialect("draft-07", jsonschema.Draft7Validator, ref_overrides=True)
DRAFT_2019_09 = Dialect("2019-09", jsonschema.Draft201909Validator)
DRAFT_2020_12 = Dialect("2020-12", jsonschema.Draft202012Validator, items_array=False)

# `$schema` without scheme and trailing '#' or '/' -> dialect.
_BY_URI: dict[str, Dialect] = {
    "json-schema.org/draft-04/schema": DRAFT_04,
    "json-schema.org/draft-06/schema": DRAFT_06,
    "json-schema.org/draft-07/schema": DRAFT_07,
    "json-schema.org/draft/2019-09/schema": DRAFT_2019_09,
    "json-schema.org/draft/2020-12/schema": DRAFT_2020_12,
}


def dialect_of(schema: Node) -> Dialect:
    """The dialect the root's `$schema` names; 2020-12 when absent or unrecognised (documented)."""
    uri = schema.get("$schema")
    if not isinstance(uri, str):
        return DRAFT_2020_12
    key = uri.strip().split("://", 1)[-1].rstrip("#/")
    if key == "json-schema.org/draft-03/schema":
        raise GrammarError("JSON Schema draft-03 is not supported (use draft-04 or later)", "$schema")
    return _BY_URI.get(key, DRAFT_2020_12)


def normalize(schema: Node, dialect: Dialect) -> Node:
    """`schema` (valid under `dialect`) spelled as draft 2020-12; `$schema` is dropped."""
    translate = RefTranslator(schema, _renames(dialect), _root_id(schema, dialect))
    return _Normalizer(dialect, translate).node(schema)


def _root_id(schema: Node, dialect: Dialect) -> str | None:
    value = schema.get(dialect.id_keyword)
    return value.rstrip("#") if isinstance(value, str) else None


def _renames(dialect: Dialect) -> Callable[[Node, str], str]:
    """segment renames as a $ref pointer crosses a schema node of `dialect`."""

    def rename(node: Node, segment: str) -> str:
        if segment == "definitions" and "$defs" not in node:
            return "$defs"
        if dialect.items_array and isinstance(node.get("items"), list):
            return {"items": "prefixItems", "additionalItems": "items"}.get(segment, segment)
        if segment == "dependencies" and isinstance(node.get("dependencies"), dict):
            return "dependentSchemas"
        return segment

    return rename


# Keywords whose value is one subschema, a list of them, or a name -> subschema map (after renaming).
_SINGLE = ("additionalProperties", "items", "not", "if", "then", "else", "contains", "propertyNames",
           "unevaluatedItems", "unevaluatedProperties", "additionalItems")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAPS = ("properties", "patternProperties", "dependentSchemas", "$defs")


class _Normalizer:
    def __init__(self, dialect: Dialect, translate: RefTranslator) -> None:
        self.dialect, self.translate = dialect, translate

    def node(self, node: Any) -> Any:
        if not isinstance(node, dict):
            return node  # boolean schemas (and, defensively, anything else) stay as they are
        node = self._renamed(node)
        out: Node = {}
        for key, value in node.items():
            if key in _SINGLE:
                out[key] = self.node(value)
            elif key in _LISTS and isinstance(value, list):
                out[key] = [self.node(child) for child in value]
            elif key in _MAPS and isinstance(value, dict):
                out[key] = {name: self.node(child) for name, child in value.items()}
            elif key == "$ref":
                out[key] = self._ref(value)
            else:
                out[key] = value
        return clean_node(out)

    def _ref(self, ref: Any) -> Any:
        if not is_local_ref(ref, self.translate.root_id):
            return ref  # refused later, by name
        return "#" + self.translate(local_pointer(ref, self.translate.root_id))

    def _renamed(self, node: Node) -> Node:
        d, keywords = self.dialect, self.dialect.keywords
        node = {k: v for k, v in node.items() if k in keywords}
        if d.ref_overrides and "$ref" in node:
            node = {k: v for k, v in node.items() if k in ("$ref", "definitions", "$defs")}
        if d.id_keyword != "$id" and isinstance(node.get("id"), str):
            node = _rename_key(node, "id", "$id")
        if "definitions" in node and "$defs" not in node:
            node = _rename_key(node, "definitions", "$defs")
        if d.boolean_exclusive:
            node = _numeric_exclusive(node)
        if "dependencies" in node:
            node = _split_dependencies(node)
        if d.items_array and isinstance(node.get("items"), list):
            node = _tuple_items(node)
        elif "additionalItems" in node:  # means nothing without an items array
            node = {k: v for k, v in node.items() if k != "additionalItems"}
        return node


def _rename_key(node: Node, old: str, new: str) -> Node:
    return {(new if k == old else k): v for k, v in node.items()}


def _numeric_exclusive(node: Node) -> Node:
    """draft-04 `{"maximum": 5, "exclusiveMaximum": true}` -> `{"exclusiveMaximum": 5}`; false -> dropped."""
    out = dict(node)
    for bound, flag in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if flag in out:
            exclusive = out.pop(flag)
            if exclusive is True and bound in out:
                out[flag] = out.pop(bound)
    return out


def _split_dependencies(node: Node) -> Node:
    dependencies = node.get("dependencies")
    out = {k: v for k, v in node.items() if k != "dependencies"}
    if not isinstance(dependencies, dict):
        return out
    required = {k: v for k, v in dependencies.items() if isinstance(v, list)}
    schemas = {k: v for k, v in dependencies.items() if not isinstance(v, list)}
    if required:
        out["dependentRequired"] = required
    if schemas:
        out["dependentSchemas"] = schemas
    return out


def _tuple_items(node: Node) -> Node:
    out = {k: v for k, v in node.items() if k not in ("items", "additionalItems")}
    out["prefixItems"] = node["items"]
    if "additionalItems" in node:
        out["items"] = node["additionalItems"]
    return out


def client_spelling(schema: Node, dialect: Dialect, pointer: str, keyword: str | None) -> tuple[str, str | None]:
    """A normalized pointer and keyword spelled as the client wrote them in `schema` (`/$defs/a` is
    `/definitions/a` in a schema that says `definitions`; `dependentRequired` is draft-07's `dependencies`)."""
    rename = _renames(dialect)
    out: list[str] = []
    current: Any = schema
    position = "schema"
    for part in split_pointer(pointer):
        if position == "schema" and isinstance(current, dict):
            original = _original_keyword(current, part, rename)
            out.append(original)
            position = "map" if original in _MAPS + ("definitions", "dependencies") else \
                "list" if original in _LISTS or isinstance(current.get(original), list) else "schema"
        else:
            out.append(part)
            position = "schema"
        current = current.get(out[-1]) if isinstance(current, dict) else \
            current[int(part)] if isinstance(current, list) and part.isdigit() and int(part) < len(current) else None
    if keyword is not None and isinstance(current, dict):
        keyword = _original_keyword(current, keyword, rename)
    return join_pointer(out), keyword


def _original_keyword(node: Node, name: str, rename: Callable[[Node, str], str]) -> str:
    if name in node:
        return name
    if name in ("dependentRequired", "dependentSchemas") and "dependencies" in node:
        return "dependencies"
    return next((key for key in node if rename(node, key) == name), name)
