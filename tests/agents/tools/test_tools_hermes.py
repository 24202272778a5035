"""HermesParser over recorded Qwen/Hermes-style texts: parse results, and every split of each text."""
from __future__ import annotations

import pytest

from conch.agents.tool_formats.hermes import HermesParser



def case(text: str, content: str | None, calls: list, eager_same: bool = True, *, id: str):
    return pytest.param(text, content, calls, eager_same, id=id)


WEATHER = '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}'

SAMPLES = [
    case(f"<tool_call>\n{WEATHER}\n</tool_call>", None,
                 [("get_weather", {"city": "Paris", "unit": "celsius"})], id="single"),
    case(f'<tool_call>\n{WEATHER}\n</tool_call>\n<tool_call>\n{{"name": "get_time", "arguments": '
                 '{"timezone": "Europe/Paris"}}\n</tool_call>', None,
                 [("get_weather", {"city": "Paris", "unit": "celsius"}), ("get_time", {"timezone": "Europe/Paris"})],
                 id="parallel"),
    case(f"Let me look that up for you.\n\n<tool_call>\n{WEATHER}\n</tool_call>",
                 "Let me look that up for you.", [("get_weather", {"city": "Paris", "unit": "celsius"})],
                 id="text-before"),
    case('<tool_call>\n{"name": "search", "arguments": {"query": "東京の天気 ☀️", "city": "Z\\u00fcrich",'
                 ' "emoji": "\\ud83d\\ude00", "note": "naïve café"}}\n</tool_call>', None,
                 [("search", {"query": "東京の天気 ☀️", "city": "Zürich", "emoji": "😀", "note": "naïve café"})],
                 id="unicode"),
    case('<tool_call>\n{"name": "find_products", "arguments": {"filters": {"price": {"min": 10, '
                 '"max": 99.5}, "tags": ["red", "wool"], "in_stock": true}, "limit": 5, "cursor": null, '
                 '"sort": [{"field": "price", "desc": false}]}}\n</tool_call>', None,
                 [("find_products", {"filters": {"price": {"min": 10, "max": 99.5}, "tags": ["red", "wool"],
                                                 "in_stock": True}, "limit": 5, "cursor": None,
                                     "sort": [{"field": "price", "desc": False}]})], id="nested"),
    case('<tool_call>\n{"name": "run_python", "arguments": {"code": "def f():\\n    return {\\"a\\": '
                 '[1, 2]}  # }}\\nprint(\'</tool_call>\')", "path": "C:\\\\tmp\\\\{x}"}}\n</tool_call>', None,
                 [("run_python", {"code": "def f():\n    return {\"a\": [1, 2]}  # }}\nprint('</tool_call>')",
                                  "path": "C:\\tmp\\{x}"})], id="braces-and-tags-in-strings"),
    case('<tool_call>\n{"name": "write_file", "arguments": {"text": "line one\nline two\ttabbed"}}'
                 "\n</tool_call>", None, [("write_file", {"text": "line one\nline two\ttabbed"})],
                 id="raw-newline-in-string"),
    case('<tool_call>\n{"arguments": {"name": "John Doe"}, "name": "get_age"}\n</tool_call>', None,
                 [("get_age", {"name": "John Doe"})], id="arguments-before-name"),
    case('<tool_call>\n{"name": "lookup", "arguments": "{\\"id\\": 42}"}\n</tool_call>', None,
                 [("lookup", {"id": 42})], id="string-encoded-arguments"),
    case('<tool_call>\n{"name": "get_time"}\n</tool_call>', None, [("get_time", {})], id="no-arguments"),
    case(f"<tool_call>\n{WEATHER}", None, [("get_weather", {"city": "Paris", "unit": "celsius"})],
                 id="missing-close-tag-at-end"),
    case(f"<tool_call>\n{WEATHER}\n</tool_call>\nI asked for the weather.", "\nI asked for the weather.",
                 [("get_weather", {"city": "Paris", "unit": "celsius"})], id="text-after"),
    case("The capital of France is Paris. In HTML, <b>bold</b> and a < b hold; <tool is a word.",
                 "The capital of France is Paris. In HTML, <b>bold</b> and a < b hold; <tool is a word.", [],
                 id="text-only-with-angles"),
    case("You can call me with <tool_", "You can call me with <tool_", [], id="partial-tag-at-end"),
    case('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>',
                 '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>', [],
                 eager_same=False, id="malformed-missing-brace"),
    case("<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Paris'}}\n</tool_call>",
                 "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Paris'}}\n</tool_call>", [],
                 id="malformed-single-quotes"),
    case('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',
                 '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par', [],
                 eager_same=False, id="truncated"),
    case(f'<tool_call>\n{WEATHER}\n</tool_call>\n<tool_call>\n{{"name": "get_time", "arguments": '
                 '[1, 2]}\n</tool_call>',
                 '<tool_call>\n{"name": "get_time", "arguments": [1, 2]}\n</tool_call>',
                 [("get_weather", {"city": "Paris", "unit": "celsius"})], id="good-then-malformed"),
    case(f"<tool_call>\n{WEATHER} trailing junk</tool_call>",
                 f"<tool_call>\n{WEATHER} trailing junk</tool_call>", [], eager_same=False,
                 id="malformed-junk-before-close"),
]


@pytest.mark.parametrize(("text", "content", "calls", "eager_same"), SAMPLES)
def test_sample(check_stream, text, content, calls, eager_same):
    check_stream(HermesParser, text, content, calls, eager_same)
