"""Gemma3Parser over ```tool_code blocks as Google's Gemma function-calling guide prompts them."""
from __future__ import annotations

import pytest

from conch.agents.tool_formats.gemma3 import Gemma3Parser

SAMPLES = [
    pytest.param('```tool_code\nget_weather(city="Paris")\n```', None, [("get_weather", {"city": "Paris"})], True,
                 id="single"),
    pytest.param('I will look.\n\n```tool_code\nget_weather(city="Paris", days=2)\nadd(a=1, b=true)\n```\nThanks.',
                 "I will look.\nThanks.", [("get_weather", {"city": "Paris", "days": 2}), ("add", {"a": 1, "b": True})],
                 True, id="text-parallel-text"),
    pytest.param('```tool_code\nping()', None, [("ping", {})], True, id="missing-fence"),
    pytest.param('```tool_code\nprint("hi")\n```', '```tool_code\nprint("hi")\n```', [], True, id="not-keyword-call"),
    pytest.param('```python\nget_weather(city="Paris")\n```', '```python\nget_weather(city="Paris")\n```', [], True,
                 id="other-fence-is-text"),
]


@pytest.mark.parametrize(("text", "content", "calls", "eager_same"), SAMPLES)
def test_sample(check_stream, text, content, calls, eager_same):
    check_stream(Gemma3Parser, text, content, calls, eager_same)
