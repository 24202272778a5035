"""GraniteParser over Granite 3.x `<|tool_call|>` texts: parse results, and every split."""
from __future__ import annotations

import pytest

from conch.agents.tool_formats.granite import GraniteParser

WEATHER = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
ADD = '{"name": "add", "arguments": {"a": 1, "b": 2}}'
SAMPLES = [
    pytest.param(f"<|tool_call|>[{WEATHER}]", None, [("get_weather", {"city": "Paris"})], True, id="single"),
    pytest.param(f"<|tool_call|>[{WEATHER}, {ADD}]", None,
                 [("get_weather", {"city": "Paris"}), ("add", {"a": 1, "b": 2})], True, id="parallel"),
    pytest.param(f"Checking.<|tool_call|>[{WEATHER}", "Checking.", [("get_weather", {"city": "Paris"})], True,
                 id="text-before-missing-bracket"),
    pytest.param("[TOOL_CALLS] is Mistral's, not Granite's", "[TOOL_CALLS] is Mistral's, not Granite's", [], True,
                 id="other-marker-is-text"),
]


@pytest.mark.parametrize(("text", "content", "calls", "eager_same"), SAMPLES)
def test_sample(check_stream, text, content, calls, eager_same):
    check_stream(GraniteParser, text, content, calls, eager_same)
