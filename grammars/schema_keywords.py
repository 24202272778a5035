"""Exactly which JSON Schema keywords Conch enforces, and which validation keywords it refuses.

Keywords are spelled as in draft 2020-12: every schema is normalized first (grammars/dialects.py),
and everything that is not a validation keyword of its dialect is dropped there, as JSON Schema
says unknown keywords and annotations are ignored. What is left is either ENFORCED (honoured by the
default library, llguidance; a library that cannot honour one says so through its own `check`) or
REFUSED (a 400 naming it). docs/structured-outputs.md is this table in prose.
"""

from __future__ import annotations

import jsonschema

ENFORCED_BY_TYPE: dict[str, frozenset[str]] = {
    "any": frozenset({"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions"}),
    "object": frozenset({"properties", "patternProperties", "required", "additionalProperties"}),
    "array": frozenset({"items", "prefixItems", "minItems", "maxItems"}),
    "string": frozenset({"minLength", "maxLength", "pattern", "format"}),
    "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}),
}
ENFORCED: frozenset[str] = frozenset().union(*ENFORCED_BY_TYPE.values())

# Validation keywords of some dialect that no grammar here can enforce exactly (`$id` is refused
# only below the root, where it would move the base of the $refs inside it).
REFUSED: frozenset[str] = (
    frozenset(jsonschema.Draft202012Validator.VALIDATORS) | frozenset(jsonschema.Draft201909Validator.VALIDATORS)
) - ENFORCED | frozenset({"$id"})

# Values of `format` that are enforced (the string must be a valid instance of the format). Any
# other value is an annotation and is ignored, except `byte` (OpenAPI's base64), which becomes a pattern.
FORMATS: frozenset[str] = frozenset(
    {"date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri"}
)
BASE64_PATTERN = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"

# Where subschemas live in a normalized schema (what the walker descends into).
SUBSCHEMA: tuple[str, ...] = ("additionalProperties", "items", "not", "if", "then", "else", "contains",
                              "propertyNames", "unevaluatedItems", "unevaluatedProperties")
SUBSCHEMA_LISTS: tuple[str, ...] = ("anyOf", "oneOf", "allOf", "prefixItems")
SUBSCHEMA_MAPS: tuple[str, ...] = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")
CONTAINERS: frozenset[str] = frozenset({"$defs", "definitions"})
