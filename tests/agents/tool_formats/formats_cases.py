"""Tools offered in the tool-format tests: bounded, so a random walk through a grammar always ends."""
from __future__ import annotations

import json

import jsonschema

from conch.agents.tools import ParsedOutput, ToolFunction

WEATHER = ToolFunction("get_weather", "Current weather in a city", {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                     "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city"], "additionalProperties": False})
ADD = ToolFunction("add", "Add two integers", {
    "type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 999},
                                     "b": {"type": "integer", "minimum": 0, "maximum": 999}},
    "required": ["a", "b"]})
OPTIONS = ToolFunction("set_options", "Only optional parameters, one of them nested", {
    "type": "object", "properties": {
        "verbose": {"type": "boolean"},
        "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "maxItems": 2},
        "note": {"type": ["string", "null"], "maxLength": 8}},
    "$defs": {"tag": {"type": "string", "maxLength": 5}}})
NOTHING = ToolFunction("ping", "No parameters")
TOOLS = (WEATHER, ADD, OPTIONS, NOTHING)


def check_calls(parsed: ParsedOutput, names: set[str]) -> None:
    """Every call names one of `names`, with arguments valid under that tool's schema."""
    schemas = {t.name: t.schema for t in TOOLS}
    for call in parsed.tool_calls:
        assert call.name in names, call
        jsonschema.validate(json.loads(call.arguments), schemas[call.name])
