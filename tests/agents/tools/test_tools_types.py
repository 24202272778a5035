"""The tool-calling values, the stream contract checker, and the parsers the format registry holds."""
from __future__ import annotations

import dataclasses
import json
import re

import pytest

from conch.agents.tool_formats import DEFAULT_FORMAT, ToolParser, UnknownToolFormat, format_names, get_format
from conch.agents.tools import (
    ContentDelta,
    StreamContractError,
    ToolCall,
    ToolCallDelta,
    ToolFunction,
    assemble,
    new_call_id,
)


def test_new_call_id_shape_and_uniqueness():
    ids = {new_call_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"call_[A-Za-z0-9]{9,}", call_id) for call_id in ids)


def test_tool_function_stores_canonical_parameters():
    schema = {"type": "object", "properties": {"city": {"type": "string", "description": "Zürich?"}},
              "required": ["city"]}
    tool = ToolFunction("get_weather", "Current weather", schema)
    assert tool.parameters == '{"type":"object","properties":{"city":{"type":"string","description":"Zürich?"}},' \
                              '"required":["city"]}'
    assert tool.schema == schema and tool.schema is not tool.schema
    assert tool == ToolFunction("get_weather", "Current weather", tool.parameters)
    assert tool == ToolFunction("get_weather", "Current weather", json.dumps(schema, indent=2))
    assert hash(tool) == hash(ToolFunction("get_weather", "Current weather", dict(schema)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        tool.name = "x"  # type: ignore[misc]


def test_assemble_joins_content_and_fragments():
    events = [ContentDelta("Hi"), ToolCallDelta(0, "call_aaaaaaaaaa", "f", ""), ToolCallDelta(0, None, None, '{"a"'),
              ToolCallDelta(1, "call_bbbbbbbbbb", "g", ""), ToolCallDelta(0, None, None, ":1}"), ContentDelta("!")]
    parsed = assemble(events)
    assert parsed.content == "Hi!"
    assert parsed.tool_calls == [ToolCall("call_aaaaaaaaaa", "f", '{"a":1}'), ToolCall("call_bbbbbbbbbb", "g", "")]
    assert assemble([]).content is None


@pytest.mark.parametrize("events", [
    [ToolCallDelta(0, None, None, "{}")],                                            # no first delta
    [ToolCallDelta(1, "call_aaaaaaaaaa", "f", "")],                                  # index skipped
    [ToolCallDelta(0, "call_aaaaaaaaaa", "f", ""), ToolCallDelta(0, None, "f", "{}")],  # name repeated
    [ToolCallDelta(0, "call_aaaaaaaaaa", "f", ""), ToolCallDelta(0, "call_bbbbbbbbbb", "f", "")],  # id repeated
    [ToolCallDelta(0, "call_aaaaaaaaaa", None, "")],                                 # no name
])
def test_assemble_rejects_contract_breaks(events):
    with pytest.raises(StreamContractError):
        assemble(events)


def test_registry_names_and_lazy_classes():
    assert format_names() == ["deepseek_v3", "deepseek_v31", "gemma3", "glm45", "granite", "harmony", "hermes",
                              "kimi_k2", "llama3", "mistral", "pythonic", "qwen3_coder"]
    assert DEFAULT_FORMAT == "hermes"
    for name in format_names():
        cls = get_format(name).parser
        assert issubclass(cls, ToolParser) and cls.name == name


def test_registry_unknown_name_lists_known():
    with pytest.raises(UnknownToolFormat, match="hermes"):
        get_format("nope")
