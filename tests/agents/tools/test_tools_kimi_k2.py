"""KimiK2Parser over Kimi-K2 texts (Moonshot's documented call section): parse results, and every split."""
from __future__ import annotations

import pytest

from conch.agents.tool_formats.kimi_k2 import KimiK2Parser, name_of_id

B, E = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"


def call(call_id: str, arguments: str) -> str:
    return f"<|tool_call_begin|>{call_id}<|tool_call_argument_begin|>{arguments}<|tool_call_end|>"


PARIS = ("get_weather", {"city": "Paris"})
TRUNCATED = B + '<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Par'
SAMPLES = [
    pytest.param(B + call("functions.get_weather:0", '{"city": "Paris"}') + E, None, [PARIS], True, id="single"),
    pytest.param("I will check both." + B + call("functions.get_weather:0", '{"city": "Paris"}')
                 + call("functions.add:1", '{"a": 1, "b": [2, "東京"]}') + E, "I will check both.",
                 [PARIS, ("add", {"a": 1, "b": [2, "東京"]})], True, id="text-then-parallel"),
    pytest.param(B + call("get_weather:0", '{"city": "Paris"}'), None, [PARIS], True, id="bare-id-no-section-end"),
    pytest.param(B + call("functions.ping:0", "{}") + E + "\nDone.", "\nDone.", [("ping", {})], True,
                 id="text-after"),
    pytest.param(TRUNCATED, TRUNCATED, [], False, id="truncated"),
    pytest.param("Kimi writes <|tool_calls_section", "Kimi writes <|tool_calls_section", [], True,
                 id="partial-marker"),
    pytest.param(B + "oops" + E, B + "oops" + E, [], True, id="not-a-call"),
]


@pytest.mark.parametrize(("text", "content", "calls", "eager_same"), SAMPLES)
def test_sample(check_stream, text, content, calls, eager_same):
    check_stream(KimiK2Parser, text, content, calls, eager_same)


def test_call_ids_name_the_function():
    assert [name_of_id(i) for i in ("functions.get_weather:0", "get_weather:12", "ns.tool", "functions.a.b:3")] == \
        ["get_weather", "get_weather", "ns.tool", "a.b"]
