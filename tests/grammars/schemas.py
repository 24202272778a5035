"""The structured-output test suite: JSON schemas with a name and whether they are bounded.

Shared data: the grammar tests drive every library through these, and the end-to-end tests send
them to a real server. `bounded` means every output the grammar allows is short: strings have a
maxLength, an enum or a fixed-length format; integers have both bounds; arrays have maxItems;
objects are closed (additionalProperties false); there are no floats and no recursion. A bounded
schema's output always ends within BOUNDED_MAX_TOKENS tokens, even from a model that picks tokens at
random (a random model never chooses to close an unbounded string). Unbounded ones are valid
whenever the output ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Above the worst case over the bounded schemas (nested_address: 46 free characters at one token per
# UTF-8 byte, at most 4 each, plus ~60 tokens of keys, punctuation and single spaces; no \u escapes).
BOUNDED_MAX_TOKENS = 320


@dataclass(frozen=True)
class SchemaCase:
    name: str
    schema: dict[str, Any]
    bounded: bool


def _closed(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """An object with exactly these properties (all required unless `required` says otherwise)."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


def _text(max_length: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_length}


def _int(low: int, high: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": low, "maximum": high}


_POINT = _closed({"x": _int(-10, 10), "y": _int(-10, 10)})
_SHAPE_CIRCLE = _closed({"kind": {"const": "circle"}, "radius": _int(1, 100)})
_SHAPE_SQUARE = _closed({"kind": {"const": "square"}, "side": _int(1, 100)})

BOUNDED: list[SchemaCase] = [
    SchemaCase("flat_person", _closed({"name": _text(12), "age": _int(0, 120)}), True),
    SchemaCase("enum_top_level", {"type": "string", "enum": ["active", "inactive", "pending"]}, True),
    SchemaCase("const_fields", _closed({"version": {"const": "1.0"}, "kind": {"const": 3}}), True),
    SchemaCase(
        "nested_address",
        _closed({"name": _text(10), "address": _closed({"street": _text(16), "city": _text(10),
                                                        "zip": {"type": "string", "pattern": "^[0-9]{5}$"}})}),
        True,
    ),
    SchemaCase(
        "array_of_enums",
        _closed({"tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 3}}),
        True,
    ),
    SchemaCase("array_min_max", {"type": "array", "items": _int(0, 9), "minItems": 2, "maxItems": 4}, True),
    SchemaCase(
        "optional_fields",
        _closed({"id": _int(1, 999), "nickname": _text(8), "active": {"type": "boolean"}}, required=["id"]),
        True,
    ),
    SchemaCase("booleans_and_null", _closed({"flag": {"type": "boolean"}, "nothing": {"type": "null"}}), True),
    SchemaCase(
        "any_of_scalars",
        _closed({"value": {"anyOf": [_int(0, 9), _text(4), {"type": "null"}]}}),
        True,
    ),
    SchemaCase("one_of_discriminated", _closed({"shape": {"oneOf": [_SHAPE_CIRCLE, _SHAPE_SQUARE]}}), True),
    SchemaCase(
        "ref_and_defs",
        {"$defs": {"point": _POINT}, **_closed({"start": {"$ref": "#/$defs/point"}, "end": {"$ref": "#/$defs/point"}})},
        True,
    ),
    SchemaCase("pattern_code", {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"}, True),
    SchemaCase("format_date", _closed({"day": {"type": "string", "format": "date"}}), True),
    SchemaCase("format_uuid", _closed({"id": {"type": "string", "format": "uuid"}}), True),
    SchemaCase("format_ipv4", _closed({"ip": {"type": "string", "format": "ipv4"}}), True),
    SchemaCase(
        "exclusive_bounds",
        _closed({"n": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 1000}}),
        True,
    ),
    SchemaCase(
        "tuple_prefix_items",
        {"type": "array", "prefixItems": [_int(0, 9), {"enum": ["a", "b"]}, {"type": "boolean"}], "items": False,
         "minItems": 3},
        True,
    ),
    SchemaCase(
        "nested_arrays",
        {"type": "array", "items": {"type": "array", "items": _int(0, 3), "maxItems": 2}, "maxItems": 2},
        True,
    ),
    SchemaCase("multiple_of", _closed({"step": {**_int(0, 100), "multipleOf": 5}}), True),
    SchemaCase("nullable_type_list", _closed({"note": {"type": ["string", "null"], "maxLength": 6}}), True),
    SchemaCase("all_of_string", {"allOf": [{"type": "string", "maxLength": 6}, {"pattern": "^[a-z]+$"}]}, True),
    SchemaCase("empty_closed_object", {"type": "object", "properties": {}, "additionalProperties": False}, True),
    SchemaCase("enum_mixed_types", {"enum": [1, "two", None, True, 4]}, True),
    SchemaCase(
        "deeply_nested",
        _closed({"a": _closed({"b": _closed({"c": _closed({"d": _int(0, 9), "e": {"type": "boolean"}})})})}),
        True,
    ),
    SchemaCase(
        "annotations",
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Item", "description": "An item",
         "$comment": "annotations only",
         **_closed({"sku": {**_text(8), "examples": ["A1"], "default": "A0", "deprecated": False},
                    "qty": {**_int(1, 9), "readOnly": True}})},
        True,
    ),
    SchemaCase(
        "array_of_objects",
        _closed({"items": {"type": "array", "maxItems": 3,
                           "items": _closed({"id": _int(1, 99), "label": {"enum": ["new", "used"]}})}}),
        True,
    ),
    SchemaCase(
        "draft7_definitions",
        {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"color": {"enum": ["cyan", "magenta"]}},
         **_closed({"fg": {"$ref": "#/definitions/color"}, "bg": {"$ref": "#/definitions/color"}})},
        True,
    ),
    SchemaCase("string_length_range", _closed({"code": {"type": "string", "minLength": 2, "maxLength": 4}}), True),
    # Older dialects, read by $schema and checked with their own jsonschema validator (issue 13).
    SchemaCase(
        "draft04_boolean_exclusive",
        {"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://example.com/limits",
         **_closed({"n": {"type": "integer", "minimum": 0, "maximum": 10, "exclusiveMaximum": True},
                    "m": {"type": "integer", "minimum": 5, "exclusiveMinimum": True, "maximum": 9}})},
        True,
    ),
    SchemaCase(
        "draft04_definitions_by_id",
        {"$schema": "http://json-schema.org/draft-04/schema", "id": "http://example.com/colors",
         "definitions": {"color": {"enum": ["cyan", "magenta"]}},
         **_closed({"fg": {"$ref": "http://example.com/colors#/definitions/color"},
                    "bg": {"$ref": "#/definitions/color"}})},
        True,
    ),
    SchemaCase(
        "draft06_tuple_items",
        {"$schema": "http://json-schema.org/draft-06/schema#", "type": "array",
         "items": [_int(0, 9), {"const": "x"}], "additionalItems": False, "minItems": 2},
        True,
    ),
    SchemaCase(
        "draft07_ref_siblings_ignored",
        {"$schema": "http://json-schema.org/draft-07/schema#", "$ref": "#/definitions/code", "maxLength": 1,
         "definitions": {"code": {"type": "string", "pattern": "^[a-z]{3}$"}}},
        True,
    ),
    SchemaCase(
        "draft2019_items_additional",
        {"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "array",
         "items": [{"enum": ["a", "b"]}], "additionalItems": {"type": "boolean"}, "minItems": 1, "maxItems": 3},
        True,
    ),
    SchemaCase(
        "kubernetes_style_extensions",
        {"description": "Pod is a collection of containers.", "x-kubernetes-group-version-kind":
            [{"group": "", "kind": "Pod", "version": "v1"}],
         **_closed({"apiVersion": {"type": "string", "enum": ["v1"]},
                    "kind": {"type": "string", "enum": ["Pod"], "x-kubernetes-preserve-unknown-fields": True},
                    "replicas": {**_int(0, 5), "format": "int32", "readonly": True}})},
        True,
    ),
    SchemaCase(
        "one_of_refs_discriminated",  # pydantic's discriminated union; objects left open, closed for generation
        {"$defs": {"cat": {"type": "object", "properties": {"pet_type": {"const": "cat"}, "lives": _int(1, 9)},
                           "required": ["pet_type"]},
                   "dog": {"type": "object", "properties": {"pet_type": {"const": "dog"}, "name": _text(6)},
                           "required": ["pet_type", "name"]}},
         "type": "object", "properties": {"pet": {"oneOf": [{"$ref": "#/$defs/cat"}, {"$ref": "#/$defs/dog"}]}},
         "required": ["pet"]},
        True,
    ),
    SchemaCase(
        "one_of_required_xor",  # exactly one of a, b
        {"type": "object", "properties": {"a": _text(4), "b": _int(0, 9)}, "additionalProperties": False,
         "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
        True,
    ),
    SchemaCase(
        "one_of_untyped_branches",
        {"oneOf": [{"properties": {"s": _text(5)}, "required": ["s"], "additionalProperties": False},
                   {"properties": {"n": _int(0, 9)}, "required": ["n"], "additionalProperties": False}]},
        True,
    ),
    SchemaCase("one_of_by_type", _closed({"v": {"oneOf": [{"type": "boolean"}, _text(3)]}}), True),
    SchemaCase(
        "one_of_disjoint_required",
        {"oneOf": [{"type": "object", "properties": {"email": _text(10)}, "required": ["email"]},
                   {"type": "object", "properties": {"phone": _text(8)}, "required": ["phone"]}]},
        True,
    ),
    SchemaCase(
        "one_of_enum_discriminator",
        {"oneOf": [{"type": "object", "properties": {"t": {"enum": ["a", "b"]}, "n": _int(0, 9)}, "required": ["t"]},
                   {"type": "object", "properties": {"t": {"enum": ["c"]}, "s": _text(4)}, "required": ["t"]}]},
        True,
    ),
]

UNBOUNDED: list[SchemaCase] = [
    SchemaCase("any_object", {"type": "object"}, False),
    SchemaCase("free_string", _closed({"text": {"type": "string"}}), False),
    SchemaCase("number_bounds", _closed({"ratio": {"type": "number", "minimum": 0, "maximum": 1},
                                         "temp": {"type": "number", "exclusiveMinimum": -50, "maximum": 60}}), False),
    SchemaCase(
        "recursive_tree",
        {"$defs": {"node": _closed({"value": _int(0, 9),
                                    "children": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/node"}}},
                                   required=["value"])},
         "$ref": "#/$defs/node"},
        False,
    ),
    SchemaCase(
        "recursive_root_list",
        _closed({"v": _int(0, 9), "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}),
        False,
    ),
    SchemaCase("format_date_time", _closed({"at": {"type": "string", "format": "date-time"}}), False),
    SchemaCase("format_email", _closed({"email": {"type": "string", "format": "email"}}), False),
    SchemaCase(
        "formats_misc",
        _closed({"host": {"type": "string", "format": "hostname"}, "v6": {"type": "string", "format": "ipv6"},
                 "time": {"type": "string", "format": "time"}, "took": {"type": "string", "format": "duration"},
                 "link": {"type": "string", "format": "uri"}}),
        False,
    ),
    SchemaCase("additional_properties_schema", {"type": "object", "additionalProperties": _int(0, 9)}, False),
    SchemaCase("unbounded_array", {"type": "array", "items": {"type": "boolean"}}, False),
    SchemaCase("open_object", {"type": "object", "properties": {"id": _int(0, 9)}, "required": ["id"]}, False),
    SchemaCase("string_min_length", _closed({"word": {"type": "string", "minLength": 3}}), False),
    SchemaCase(
        "all_of_objects",
        {"allOf": [{"type": "object", "properties": {"a": _int(0, 9)}, "required": ["a"]},
                   {"properties": {"a": {"maximum": 5}, "b": {"type": "boolean"}}, "required": ["b"]}]},
        False,
    ),
    SchemaCase("integer_unbounded", _closed({"count": {"type": "integer", "minimum": 0}}), False),
]

SCHEMAS: list[SchemaCase] = BOUNDED + UNBOUNDED
