"""HarmonyParser over gpt-oss commentary messages addressed to functions (OpenAI's harmony format guide)."""
from __future__ import annotations

import pytest

from conch.agents.tool_formats.harmony import HarmonyParser

CALL = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location": "Tokyo"}<|call|>'
TOKYO = ("get_weather", {"location": "Tokyo"})
SAMPLES = [
    pytest.param(CALL, None, [TOKYO], True, id="single"),
    pytest.param(CALL[:-len("<|call|>")], None, [TOKYO], True, id="call-token-not-decoded"),
    pytest.param('<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>'
                 '{"location": "Tokyo"}<|call|>', None, [TOKYO], True, id="recipient-in-header"),
    pytest.param(CALL + "<|start|>assistant" + CALL.replace("Tokyo", "Oslo"), None,
                 [TOKYO, ("get_weather", {"location": "Oslo"})], True, id="parallel"),
    pytest.param("<|channel|>final<|message|>It is sunny.", "<|channel|>final<|message|>It is sunny.", [], True,
                 id="no-recipient-is-content"),
    pytest.param("Plain answer.", "Plain answer.", [], True, id="plain"),
    pytest.param(CALL[:-20], CALL[:-20], [], False, id="truncated"),
]


@pytest.mark.parametrize(("text", "content", "calls", "eager_same"), SAMPLES)
def test_sample(check_stream, text, content, calls, eager_same):
    check_stream(HarmonyParser, text, content, calls, eager_same)
