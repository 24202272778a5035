"""raw_values.py: bare values typed from the schema, both ways, and what a grammar cannot write bare."""
from __future__ import annotations

import pytest

from conch.agents.tool_choice import ToolChoice
from conch.agents.tool_formats import ToolFormatError, get_format
from conch.agents.tool_formats.raw_values import read_value, value_rule
from conch.agents.tools import ToolFunction


@pytest.mark.parametrize(("text", "schema", "value"), [
    ("42", {"type": "string"}, "42"),
    ("42", {"type": "integer"}, 42),
    ("4.5", {"type": "number"}, 4.5),
    ("3", {"type": "number"}, 3),
    ("true", {"type": "boolean"}, True),
    ("null", {"type": ["string", "null"]}, None),
    ("12", {"type": ["string", "null"]}, "12"),
    ("celsius", {"enum": ["celsius", "fahrenheit"]}, "celsius"),
    ("[1, 2]", {"type": "array"}, [1, 2]),
    ("not json", {"type": "integer"}, "not json"),
    ("7", {}, 7),
    ("Paris", {}, "Paris"),
])
def test_read_value(text, schema, value):
    assert read_value(text, schema) == value


def test_value_rules():
    assert value_rule({"type": "string", "maxLength": 5}, "p") == "/[^<\\x00-\\x1f]{0,5}/"
    assert value_rule({"enum": ["a", 1]}, "p") == '("a" | "1")'
    assert value_rule({"type": "integer"}, "p").startswith("%json")
    union = value_rule({"type": ["string", "null"]}, "p")
    assert union.startswith("(/") and '"type": ["null"]' in union


@pytest.mark.parametrize("fmt", ["qwen3_coder", "glm45"])
def test_a_string_pattern_cannot_be_written_bare(fmt):
    tool = ToolFunction("f", "", {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}}})
    with pytest.raises(ToolFormatError) as err:
        get_format(fmt).grammar([tool], ToolChoice("required"), 1)
    assert err.value.param == "tools.0.function.parameters.properties.code"
