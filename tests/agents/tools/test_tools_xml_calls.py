"""Qwen3Coder and GLM-4.5 parsers over their documented XML call texts: values typed from the offered tool's
schema (a string parameter keeps "42" a string, an integer one reads 3), parse results and every split."""
from __future__ import annotations

import functools

import pytest

from conch.agents.tool_formats.glm45 import Glm45Parser
from conch.agents.tool_formats.qwen3_coder import Qwen3CoderParser
from conch.agents.tools import ToolFunction

TOOLS = (ToolFunction("get_weather", "", {"type": "object", "properties": {
             "city": {"type": "string"}, "days": {"type": "integer"}, "note": {"type": ["string", "null"]},
             "tags": {"type": "array"}}}),
         ToolFunction("ping", ""))
QWEN = functools.partial(Qwen3CoderParser, tools=TOOLS)
GLM = functools.partial(Glm45Parser, tools=TOOLS)


def qwen(name: str, **params: str) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def glm(name: str, **params: str) -> str:
    body = "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n" for k, v in params.items())
    return f"<tool_call>{name}\n{body}</tool_call>"


TYPED = {"city": "42", "days": "3", "note": "null", "tags": '["a", 1]'}
TYPED_ARGS = {"city": "42", "days": 3, "note": None, "tags": ["a", 1]}
MULTILINE = {"city": "Zürich <b>", "days": "x"}  # '<' inside a value, a non-integer for an integer
QWEN_SAMPLES = [
    pytest.param(qwen("get_weather", **TYPED), None, [("get_weather", TYPED_ARGS)], id="typed-values"),
    pytest.param("Let me check.\n" + qwen("get_weather", city="Paris") + "\n" + qwen("ping"), "Let me check.",
                 [("get_weather", {"city": "Paris"}), ("ping", {})], id="text-then-parallel"),
    pytest.param(qwen("get_weather", city="line one\nline two") + "\nDone", "\nDone",
                 [("get_weather", {"city": "line one\nline two"})], id="multiline-then-text"),
    pytest.param(qwen("get_weather", city="Paris")[:-len("\n</tool_call>")], None,
                 [("get_weather", {"city": "Paris"})], id="missing-close-tag"),
    pytest.param(qwen("unknown_tool", x="1", y="two"), None, [("unknown_tool", {"x": 1, "y": "two"})],
                 id="unknown-tool-values-as-json-or-text"),
    pytest.param("<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
                 "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar", [], id="truncated"),
    pytest.param("<tool_call>\n{\"name\": \"ping\"}\n</tool_call>", "<tool_call>\n{\"name\": \"ping\"}\n</tool_call>",
                 [], id="hermes-json-is-not-this-format"),
]
GLM_SAMPLES = [
    pytest.param(glm("get_weather", **TYPED), None, [("get_weather", TYPED_ARGS)], id="typed-values"),
    pytest.param("Sure." + glm("get_weather", city="Oslo") + "\n" + glm("ping"), "Sure.",
                 [("get_weather", {"city": "Oslo"}), ("ping", {})], id="text-then-parallel"),
    pytest.param(glm("get_weather", days="3")[:-len("</tool_call>")], None, [("get_weather", {"days": 3})],
                 id="missing-close-tag"),
    pytest.param("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Pa",
                 "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Pa", [], id="truncated"),
    pytest.param("<tool_call>get weather\n</tool_call>", "<tool_call>get weather\n</tool_call>", [],
                 id="name-with-a-space"),
]


@pytest.mark.parametrize(("text", "content", "calls"), QWEN_SAMPLES)
def test_qwen3_coder_sample(check_stream, text, content, calls):
    check_stream(QWEN, text, content, calls)


@pytest.mark.parametrize(("text", "content", "calls"), GLM_SAMPLES)
def test_glm45_sample(check_stream, text, content, calls):
    check_stream(GLM, text, content, calls)
