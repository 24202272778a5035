"""Argument values written as bare text, as the XML-style formats write them (Qwen3-Coder's `<parameter=city>
Paris</parameter>`, GLM-4.5's `<arg_value>Paris</arg_value>`): a string as it is, anything else as JSON. The
text alone cannot tell the string "42" from the number 42, so both sides read the tool's schema:

  - `read_value` (the parser): a parameter whose schema allows only strings keeps its text; otherwise the text
    is read as JSON when it parses to a type the schema allows, else kept as a string where strings are allowed;
  - `value_rule` (the grammar): strings as raw text that cannot hold the markup (no '<', no control character),
    within the schema's length bounds, or one of its enum/const strings; the other types as JSON.

Invariant (tested per format): what `value_rule` writes, `read_value` reads back as a value valid under the
schema. A string parameter with a `pattern` or `format` cannot be written raw under a grammar: ToolFormatError.
"""
from __future__ import annotations

import json
from typing import Any

from conch.agents.tool_formats.base import ToolFormatError
from conch.agents.tool_formats.grammar import inline_json, literal

_JSON_TYPES = ("string", "integer", "number", "boolean", "null", "array", "object")
_RAW_STRING_KEYS = frozenset({"type", "minLength", "maxLength", "enum", "const", "title", "description",
                              "default", "examples", "$comment", "$defs", "definitions"})


def value_types(schema: dict) -> set[str] | None:
    """The JSON types a value schema allows, or None where it does not say plainly (anyOf, $ref, ...)."""
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        return {_type_of(v) for v in values}
    declared = schema.get("type")
    if declared is None:
        return None
    types = set(declared if isinstance(declared, list) else [declared])
    return types | {"integer"} if "number" in types else types


def read_value(text: str, schema: dict) -> Any:
    types = value_types(schema)
    if types == {"string"}:
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if types is None or _type_of(value) in types or (_type_of(value) == "integer" and "number" in types):
        return value
    return text if "string" in types else value


def value_rule(schema: dict, param: str) -> str:
    """The Lark text of one value under `schema` (written bare); `param` names the property in errors."""
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        return "(" + " | ".join(literal(v if isinstance(v, str) else json.dumps(v)) for v in values) + ")"
    types = value_types(schema)
    if types is None or "string" not in types:
        return inline_json(schema)
    extra = sorted(set(schema) - _RAW_STRING_KEYS)
    if extra:
        raise ToolFormatError(f"{param}: this model's tool format writes strings bare, so a grammar cannot "
                              f"enforce {extra} on them", param)
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    raw = f"/[^<\\x00-\\x1f]{{{low},{'' if high is None else high}}}/"
    rest = sorted(types - {"string", "integer"} if "number" in types else types - {"string"})
    if not rest:
        return raw
    other = {k: v for k, v in schema.items() if k not in ("minLength", "maxLength")}
    return f"({raw} | {inline_json({**other, 'type': rest})})"


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    table = {float: "number", str: "string", type(None): "null", list: "array", dict: "object"}
    return table.get(type(value), "object")
