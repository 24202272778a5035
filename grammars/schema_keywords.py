"""Exactly which JSON Schema keywords Conch enforces; every other keyword is refused up front.

Each enforced keyword is honoured by the default library (llguidance); a library that cannot
honour one says so through its own `check` (see grammars/libraries/). Annotations change nothing
about the output, so they are accepted and ignored. docs/structured-outputs.md is this table in prose.
"""

from __future__ import annotations

ENFORCED_BY_TYPE: dict[str, frozenset[str]] = {
    "any": frozenset({"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions"}),
    "object": frozenset({"properties", "required", "additionalProperties"}),
    "array": frozenset({"items", "prefixItems", "minItems", "maxItems"}),
    "string": frozenset({"minLength", "maxLength", "pattern", "format"}),
    "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}),
}
ENFORCED: frozenset[str] = frozenset().union(*ENFORCED_BY_TYPE.values())

ANNOTATIONS: frozenset[str] = frozenset(
    {"title", "description", "examples", "default", "$comment", "$schema", "$id", "deprecated", "readOnly", "writeOnly"}
)

ALLOWED: frozenset[str] = ENFORCED | ANNOTATIONS

# Values of `format` that are enforced (the string must be a valid instance of the format).
FORMATS: frozenset[str] = frozenset(
    {"date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri"}
)

# Dialects whose keyword meanings match the table above; a schema without `$schema` is 2020-12.
DIALECTS: frozenset[str] = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema",
        "http://json-schema.org/draft-07/schema#",
    }
)

# Where subschemas live under the enforced keywords (what the walker descends into).
SUBSCHEMA: tuple[str, ...] = ("additionalProperties", "items")
SUBSCHEMA_LISTS: tuple[str, ...] = ("anyOf", "oneOf", "allOf", "prefixItems")
SUBSCHEMA_MAPS: tuple[str, ...] = ("properties", "$defs", "definitions")
