"""Llama3Parser over recorded Llama 3.x JSON tool-call texts: parse results, and every split of each text."""
from __future__ import annotations

import pytest

from conch.agents.tool_formats.llama3 import Llama3Parser


def case(text: str, content: str | None, calls: list, eager_same: bool = True, *, id: str):
    return pytest.param(text, content, calls, eager_same, id=id)


WEATHER = '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}'
WEATHER_CALL = ("get_weather", {"city": "Paris", "unit": "celsius"})

SAMPLES = [
    case(WEATHER, None, [WEATHER_CALL], id="single"),
    case(f"<|python_tag|>{WEATHER}", None, [WEATHER_CALL], id="python-tag"),
    case(f'{WEATHER}; {{"name": "get_time", "parameters": {{"timezone": "Europe/Paris"}}}}', None,
         [WEATHER_CALL, ("get_time", {"timezone": "Europe/Paris"})], id="parallel"),
    case(f'<|python_tag|>{WEATHER};{{"name": "get_time", "parameters": {{}}}};', None,
         [WEATHER_CALL, ("get_time", {})], id="parallel-python-tag-trailing-separator"),
    case(f"\n\n{WEATHER}\n", None, [WEATHER_CALL], id="surrounding-whitespace"),
    case(f"I'll check the forecast for you.<|python_tag|>{WEATHER}", "I'll check the forecast for you.",
         [WEATHER_CALL], id="text-before"),
    case('{"name": "translate", "parameters": {"text": "Größe ändern — 大きさ", "target": "\\u00e9s"}}', None,
         [("translate", {"text": "Größe ändern — 大きさ", "target": "és"})], id="unicode"),
    case('{"name": "create_event", "parameters": {"event": {"title": "Stand-up", "attendees": [{"name": "Ana",'
         ' "optional": false}, {"name": "Bo", "optional": true}], "repeat": null}, "reminders": [5, 15]}}', None,
         [("create_event", {"event": {"title": "Stand-up", "attendees": [{"name": "Ana", "optional": False},
                                                                          {"name": "Bo", "optional": True}],
                                      "repeat": None}, "reminders": [5, 15]})], id="nested"),
    case('{"name": "regex_replace", "parameters": {"pattern": "\\\\{(\\\\w+)\\\\}", "replacement": "{{$1}}; '
         'done", "sample": "say \\"{hi}\\""}}', None,
         [("regex_replace", {"pattern": "\\{(\\w+)\\}", "replacement": "{{$1}}; done", "sample": 'say "{hi}"'})],
         id="braces-and-separators-in-strings"),
    case(f"{WEATHER}\n\nThat is the call I would make.", "\n\nThat is the call I would make.", [WEATHER_CALL],
         id="text-after"),
    case("Paris is the capital of France; it has about 2.1 million inhabitants.",
         "Paris is the capital of France; it has about 2.1 million inhabitants.", [], id="text-only"),
    case('{"answer": 42, "unit": "km"}', '{"answer": 42, "unit": "km"}', [], id="json-answer-not-a-call"),
    case('{"name": "Bob", "age": 31}', '{"name": "Bob", "age": 31}', [], id="json-with-name-but-no-parameters"),
    case('The call is {"name": "get_weather", "parameters": {}}',
         'The call is {"name": "get_weather", "parameters": {}}',
         [], id="bare-json-after-text-is-content"),
    case('{"name": "get_weather", "parameters": {"city": "Paris"',
         '{"name": "get_weather", "parameters": {"city": "Paris"',
         [], eager_same=False, id="truncated"),
    case('{"name": "get_weather", "parameters": {"city": Paris}}',
         '{"name": "get_weather", "parameters": {"city": Paris}}',
         [], eager_same=False, id="malformed-unquoted-value"),
    case(f'{WEATHER}; {{"name": "get_time" "parameters": {{}}}}', '; {"name": "get_time" "parameters": {}}',
         [WEATHER_CALL], id="good-then-malformed"),
    case("<|python_tag|>brave_search.call(query=\"weather\")", "<|python_tag|>brave_search.call(query=\"weather\")",
         [], id="python-tag-builtin-code-is-content"),
]


@pytest.mark.parametrize(("text", "content", "calls", "eager_same"), SAMPLES)
def test_sample(check_stream, text, content, calls, eager_same):
    check_stream(Llama3Parser, text, content, calls, eager_same)
