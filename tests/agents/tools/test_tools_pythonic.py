"""PythonicParser over recorded Llama 3.2/4 pythonic texts, and the literal-call reader under it."""
from __future__ import annotations

import pytest

from conch.agents.tool_formats.reading.python_call import literal_call
from conch.agents.tool_formats.pythonic import PythonicParser


def case(text: str, content: str | None, calls: list, eager_same: bool = True, *, id: str):
    return pytest.param(text, content, calls, eager_same, id=id)


WEATHER = ("get_weather", {"city": "Paris", "unit": "celsius"})

SAMPLES = [
    case('[get_weather(city="Paris", unit="celsius")]', None, [WEATHER], id="single"),
    case('[get_weather(city="Paris", unit="celsius"), get_time(timezone=\'Europe/Paris\')]', None,
         [WEATHER, ("get_time", {"timezone": "Europe/Paris"})], id="parallel"),
    case('\n [get_weather(city="Paris", unit="celsius"),]\n', None, [WEATHER], id="whitespace-and-trailing-comma"),
    case('[translate(text="Größe ändern — 大きさ 🚀", target="\\u00e9s")]', None,
         [("translate", {"text": "Größe ändern — 大きさ 🚀", "target": "és"})], id="unicode"),
    case('[create_event(event={"title": "Stand-up", "attendees": [("Ana", False), ("Bo", True)], "repeat": None},'
         ' reminders=[5, 15], priority=-1, weight=0.25)]', None,
         [("create_event", {"event": {"title": "Stand-up", "attendees": [["Ana", False], ["Bo", True]],
                                      "repeat": None}, "reminders": [5, 15], "priority": -1, "weight": 0.25})],
         id="nested"),
    case('[run_python(code="""def f():\n    return {\'a\': (1, 2)}  # ) ] }\n""", note=\'it\\\'s "fine" ) \')]',
         None, [("run_python", {"code": "def f():\n    return {'a': (1, 2)}  # ) ] }\n", "note": "it's \"fine\" ) "})],
         id="brackets-and-quotes-in-strings"),
    case("[search(query='x', exact=true, cursor=null)]", None,
         [("search", {"query": "x", "exact": True, "cursor": None})], id="json-spellings"),
    case('[weather.lookup(city="Oslo")]', None, [("weather.lookup", {"city": "Oslo"})], id="dotted-name"),
    case('[get_weather(city="Paris", unit="celsius")]\nI will wait for the result.', "\nI will wait for the result.",
         [WEATHER], id="text-after"),
    case("[Paris](https://en.wikipedia.org/wiki/Paris) is the capital of France.",
         "[Paris](https://en.wikipedia.org/wiki/Paris) is the capital of France.", [], id="markdown-link-is-content"),
    case("The answer is [get_weather(city='Paris')] maybe.", "The answer is [get_weather(city='Paris')] maybe.", [],
         id="list-after-text-is-content"),
    case("[1, 2, 3]", "[1, 2, 3]", [], id="number-list-is-content"),
    case('[get_weather("Paris")]', '[get_weather("Paris")]', [], id="malformed-positional"),
    case("[get_weather(city=CITY)]", "[get_weather(city=CITY)]", [], id="malformed-non-literal"),
    case('[get_weather(city="Paris"), get_time(tz=]', ', get_time(tz=]', [("get_weather", {"city": "Paris"})],
         id="good-then-malformed"),
    case('[get_weather(city="Par', '[get_weather(city="Par', [], id="truncated"),
]


@pytest.mark.parametrize(("text", "content", "calls", "eager_same"), SAMPLES)
def test_sample(check_stream, text, content, calls, eager_same):
    check_stream(PythonicParser, text, content, calls, eager_same)


@pytest.mark.parametrize("source", [
    'f(x={1, 2})', 'f(x=b"raw")', 'f(x=f"{y}")', 'f(**kw)', 'f(x=1j)', 'f(x=g())', 'f(x=float("nan"))',
    'f(x={1: "a"})', 'f(x=1e999)', '(lambda: 1)()', 'f(x=-"s")', 'f(x=1)(y=2)',
])
def test_literal_call_rejects_non_literals(source):
    assert literal_call(source) is None


def test_literal_call_canonical_form():
    assert literal_call('pkg.mod.fn(a=1.0, b=(1, [2]), c="\\ud800", d=-0.5)') == (
        "pkg.mod.fn", '{"a":1.0,"b":[1,[2]],"c":"\\ud800","d":-0.5}')
