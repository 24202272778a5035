"""DeepSeekV3Parser and DeepSeekV31Parser over DeepSeek's documented call texts: parse results, every split."""
from __future__ import annotations

import pytest

from conch.agents.tool_formats.deepseek_v3 import DeepSeekV3Parser
from conch.agents.tool_formats.deepseek_v31 import DeepSeekV31Parser

B, E = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CB, SEP, CE = "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"
PARIS = ("get_weather", {"city": "Paris"})
ADD = ("add", {"a": 1, "b": 2})


def v3(name: str, arguments: str) -> str:
    return f"{CB}function{SEP}{name}\n```json\n{arguments}\n```{CE}"


def v31(name: str, arguments: str) -> str:
    return f"{CB}{name}{SEP}{arguments}{CE}"


V3_SAMPLES = [
    pytest.param(B + v3("get_weather", '{"city": "Paris"}') + E, None, [PARIS], True, id="single"),
    pytest.param("Let me see.\n\n" + B + v3("get_weather", '{"city": "Paris"}') + "\n" + v3("add", '{"a": 1, "b": 2}')
                 + E, "Let me see.", [PARIS, ADD], True, id="text-then-parallel"),
    pytest.param(B + v3("get_weather", '{"city": "Paris"}'), None, [PARIS], True, id="no-section-end"),
    pytest.param(B + v3("add", '{"a": 1, "b": 2}') + E + " Then I add.", " Then I add.", [ADD], True,
                 id="text-after"),
    pytest.param(B + CB + "function" + SEP + "get_weather\n```python\n{}\n```" + CE + E,
                 B + CB + "function" + SEP + "get_weather\n```python\n{}\n```" + CE + E, [], True,
                 id="not-json-fence"),
    pytest.param("no calls, just ```json```", "no calls, just ```json```", [], True, id="text-only"),
]
V31_SAMPLES = [
    pytest.param(B + v31("get_weather", '{"city": "Paris"}') + E, None, [PARIS], True, id="single"),
    pytest.param(B + v31("get_weather", '{"city": "Paris"}') + v31("add", '{"a": 1, "b": 2}') + E, None,
                 [PARIS, ADD], True, id="parallel"),
    pytest.param(B + v31("add", '{"a": 1, "b": 2}') + v31("add", '{"a": 1, "b"'), v31("add", '{"a": 1, "b"'), [ADD],
                 False, id="second-broken"),
    pytest.param(B + v31("get_weather", '["Paris"]') + E, B + v31("get_weather", '["Paris"]') + E, [], True,
                 id="arguments-not-an-object"),
]


@pytest.mark.parametrize(("text", "content", "calls", "eager_same"), V3_SAMPLES)
def test_v3_sample(check_stream, text, content, calls, eager_same):
    check_stream(DeepSeekV3Parser, text, content, calls, eager_same)


@pytest.mark.parametrize(("text", "content", "calls", "eager_same"), V31_SAMPLES)
def test_v31_sample(check_stream, text, content, calls, eager_same):
    check_stream(DeepSeekV31Parser, text, content, calls, eager_same)
