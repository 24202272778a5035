"""MistralParser over recorded [TOOL_CALLS] texts, old (JSON array) and new (name[ARGS]{...}) forms."""
from __future__ import annotations

import pytest

from conch.agents.tool_formats.mistral import MistralParser


def case(text: str, content: str | None, calls: list, eager_same: bool = True, *, id: str):
    return pytest.param(text, content, calls, eager_same, id=id)


ADD = ("add", {"a": 3.5, "b": 4})
WEATHER = ("get_current_weather", {"city": "San Francisco", "state": "CA", "unit": "celsius"})
WEATHER_JSON = '{"city": "San Francisco", "state": "CA", "unit": "celsius"}'

SAMPLES = [
    case('[TOOL_CALLS][{"name": "add", "arguments": {"a": 3.5, "b": 4}}]', None, [ADD], id="array-single"),
    case(f'[TOOL_CALLS] [{{"name": "add", "arguments": {{"a": 3.5, "b": 4}}, "id": "a1B2c3D4e"}}, '
         f'{{"name": "get_current_weather", "arguments": {WEATHER_JSON}, "id": "Z9y8X7w6V"}}]', None,
         [ADD, WEATHER], id="array-parallel-with-ids"),
    case(f'Hello[TOOL_CALLS] [{{"arguments": {WEATHER_JSON}, "name": "get_current_weather"}}]', "Hello",
         [WEATHER], id="array-text-before-arguments-first"),
    case('[TOOL_CALLS]add[ARGS]{"a": 3.5, "b": 4}', None, [ADD], id="args-form-single"),
    case(f'[TOOL_CALLS]add[ARGS]{{"a": 3.5, "b": 4}}[TOOL_CALLS]get_current_weather[ARGS]{WEATHER_JSON}', None,
         [ADD, WEATHER], id="args-form-parallel"),
    case('[TOOL_CALLS]add{"a": 3.5, "b": 4}[TOOL_CALLS]multiply{"a": 3, "b": 6}', None,
         [ADD, ("multiply", {"a": 3, "b": 6})], id="args-form-special-tokens-skipped"),
    case('[TOOL_CALLS]add[CALL_ID]k3Jd9QpLm[ARGS]{"a": 3.5, "b": 4}', None, [ADD], id="args-form-call-id"),
    case('Sure, here you go.[TOOL_CALLS]translate[ARGS]{"text": "Größe — 大きさ 🚀", "to": "\\u00e9s"}',
         "Sure, here you go.", [("translate", {"text": "Größe — 大きさ 🚀", "to": "és"})], id="unicode"),
    case('[TOOL_CALLS][{"name": "bash", "arguments": {"command": "print(\\"hello world!\\")\\nre.compile(r\'{}\')",'
         ' "env": {"PS1": "[\\\\u@\\\\h]$ ", "nested": {"list": [[1], [2, [3]]]}}}}]', None,
         [("bash", {"command": "print(\"hello world!\")\nre.compile(r'{}')",
                    "env": {"PS1": "[\\u@\\h]$ ", "nested": {"list": [[1], [2, [3]]]}}})],
         id="nested-braces-and-brackets-in-strings"),
    case('[TOOL_CALLS][{"name": "add", "arguments": {"a": 3.5, "b": 4}}]\nextra trailing text',
         "\nextra trailing text", [ADD], id="text-after"),
    case('[TOOL_CALLS][{"name": "add", "arguments": {"a": 3.5, "b": 4}}', None, [ADD],
         id="missing-close-bracket-at-end"),
    case("See [1] and [TOOL] for details, or [TOOL_CALL", "See [1] and [TOOL] for details, or [TOOL_CALL", [],
         id="text-only-with-brackets"),
    case("[TOOL_CALLS] not json at all", "[TOOL_CALLS] not json at all", [], id="malformed-not-json"),
    case('[TOOL_CALLS][{"name": "add", "arguments": {"a": 3.5, "b": 4},}]',
         '[TOOL_CALLS][{"name": "add", "arguments": {"a": 3.5, "b": 4},}]', [], eager_same=False,
         id="malformed-trailing-comma"),
    case('[TOOL_CALLS]bash[ARGS]{"command": "print(\\"hello', '[TOOL_CALLS]bash[ARGS]{"command": "print(\\"hello',
         [], eager_same=False, id="truncated-args-form"),
    case('[TOOL_CALLS][{"name": "add", "arguments": {"a": 3.5, "b": 4}}, {"name": "sub", "arguments": {"a": 1 2}}]',
         ', {"name": "sub", "arguments": {"a": 1 2}}]', [ADD], eager_same=False, id="good-then-malformed"),
    case("[TOOL_CALLS]toolname_no_args", "[TOOL_CALLS]toolname_no_args", [], id="name-without-arguments"),
]


@pytest.mark.parametrize(("text", "content", "calls", "eager_same"), SAMPLES)
def test_sample(check_stream, text, content, calls, eager_same):
    check_stream(MistralParser, text, content, calls, eager_same)
