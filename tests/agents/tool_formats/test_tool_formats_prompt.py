"""Each format's prompt side: the default system prompt asks for the format's own syntax, earlier assistant
calls are written back in it (and its parser reads them back), tool results come back as user turns; and
the registry maps every parser name to the format that owns that parser."""
from __future__ import annotations

import json

import pytest

from conch.agents.tool_formats import DEFAULT_FORMAT, UnknownToolFormat, format_names, get_format
from conch.agents.tools.canonical import dumps
from tests.agents.tool_formats.formats_cases import ADD, WEATHER

CALLS = [("get_weather", {"city": "Zürich", "unit": "celsius"}), ("add", {"a": 1, "b": 22}),
         ("add", {"a": 3, "b": 4})]
HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Zürich, and 1 + 22?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(CALLS)]},
    {"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
]
# Conch's default prompt before formats existed; hermes must keep it to the byte.
HERMES_SYSTEM = (
    "You can call functions to help with the user's request. The functions are described by these JSON "
    "schemas:\n<tools>\n{tools}\n</tools>\nTo call functions, answer with one block per call and nothing "
    "else:\n<tool_call>\n{{\"name\": <function name>, \"arguments\": <arguments object>}}\n</tool_call>"
)


def test_registry_names_every_format_and_each_owns_its_parser():
    assert {"hermes", "llama3", "mistral", "pythonic", "qwen3_coder", "harmony"} <= set(format_names())
    assert DEFAULT_FORMAT == "hermes"
    for name in format_names():
        fmt = get_format(name)
        assert fmt.name == name and fmt.parser.name == name
        assert fmt.parser.__module__ == type(fmt).__module__ == f"conch.agents.tool_formats.{name}"
    with pytest.raises(UnknownToolFormat, match="nope"):
        get_format("nope")


def test_a_config_naming_an_unknown_format_is_refused_when_it_loads():
    from conch.engine.errors import InvalidRequest
    from conch.engine.repository import ModelConfig

    known = "unknown tool_call_parser 'nope'; known: deepseek_v3, .*hermes, kimi_k2, llama3"
    with pytest.raises(InvalidRequest, match=known):
        ModelConfig.from_mapping("m", {"weights": "builtin:tiny", "tool_call_parser": "nope"})
    assert ModelConfig.from_mapping("m", {"tool_call_parser": "pythonic"}).tool_call_parser == "pythonic"


@pytest.mark.parametrize("fmt_name", format_names())
def test_written_calls_parse_back(fmt_name):
    fmt = get_format(fmt_name)
    parsed = fmt.new_parser().parse(fmt.write_calls(CALLS))
    assert parsed.content is None
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [(n, dumps(a)) for n, a in CALLS]


@pytest.mark.parametrize("fmt_name", format_names())
def test_prompt_rewrites_the_conversation(fmt_name):
    fmt = get_format(fmt_name)
    system, user, assistant, tool = fmt.prompt(HISTORY, [WEATHER, ADD])
    assert system["content"].startswith("Be brief.\n\nYou can call functions") and '"get_weather"' in system["content"]
    assert user == {"role": "user", "content": HISTORY[1]["content"]}
    assert assistant["content"] == fmt.write_calls(CALLS)
    assert tool["role"] == "user" and tool["content"].startswith("<tool_response>\n") and "sunny" in tool["content"]


def test_hermes_prompt_is_unchanged():
    fmt = get_format("hermes")
    system = fmt.prompt([{"role": "user", "content": "hi"}], [WEATHER])[0]["content"]
    listing = json.dumps({"type": "function", "function": {"name": WEATHER.name, "description": WEATHER.description,
                                                           "parameters": WEATHER.schema}}, ensure_ascii=False)
    assert system == HERMES_SYSTEM.format(tools=listing)
    written = fmt.write_calls(CALLS[:2])
    assert written == ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}\n'
                       '</tool_call>\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 22}}\n</tool_call>')


@pytest.mark.parametrize("fmt_name,syntax", [("hermes", "<tool_call>"), ("llama3", '"parameters"'),
                                             ("mistral", "[TOOL_CALLS]"), ("pythonic", "(<argument name>=")])
def test_instruction_asks_for_the_formats_own_syntax(fmt_name, syntax):
    assert syntax in get_format(fmt_name).prompt([], [ADD])[0]["content"]


def test_pythonic_writes_unparsed_arguments_as_one_string():
    fmt = get_format("pythonic")
    assert fmt.write_calls([("f", "not json")]) == '[f(arguments="not json")]'
