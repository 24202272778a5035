"""Seeded fuzzing of every parser: random markup soup and truncated valid calls must never raise, must keep
the stream contract, and must reassemble to `parse` (held) or to one split-independent result (eager)."""
from __future__ import annotations

import json
import random

import pytest

from conch.agents.tool_formats import format_names, get_format

PIECES = ['<tool_call>', '</tool_call>', '<tool_', '<|python_tag|>', '[TOOL_CALLS]', '[ARGS]', '[CALL_ID]', '[TOOL_',
          '{"name": "f", "arguments": ', '{"name": "g", "parameters": ', '{"a": 1}', '{"b": "x}"}', '"', '\\', '\\"',
          '\\u00e9', '\\ud83d', '\\ude00', '{', '}', '[', ']', '(', ')', ',', ';', ':', ' ', '\n', 'text', 'é😀',
          'f(', 'x=1', 'y="a)"', "'''", '"""', '1', '-2.5e3', 'true', 'null', '[f(a=1)]', '[g(b="c"), h()]', 'add',
          '{"name": "f"}', '"arguments"', '#', '\t']


def _value(rng: random.Random, depth: int = 0):
    choices = [lambda: None, lambda: True, lambda: rng.randint(-99, 99), lambda: 'q"{}é😀\n'[:rng.randrange(8)],
               lambda: [_value(rng, depth + 1) for _ in range(rng.randrange(3))],
               lambda: {f"k{i}": _value(rng, depth + 1) for i in range(rng.randrange(3))}]
    return rng.choice(choices[:4] if depth > 2 else choices)()


def _render(name: str, calls: list[tuple[str, dict]], rng: random.Random) -> str:
    dump = lambda v: json.dumps(v, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1]))  # noqa: E731
    if name == "hermes":
        return "\n".join(f"<tool_call>\n{dump({'name': n, 'arguments': a})}\n</tool_call>" for n, a in calls)
    if name == "llama3":
        return "; ".join(dump({"name": n, "parameters": a}) for n, a in calls)
    if name == "mistral":
        return "".join(f"[TOOL_CALLS]{n}[ARGS]{dump(a)}" for n, a in calls)
    if name != "pythonic":  # the newer families: as the format writes earlier calls back into a prompt
        return get_format(name).write_calls(calls)
    return "[" + ", ".join(f"{n}(" + ", ".join(f"{k}={v!r}" for k, v in a.items()) + ")" for n, a in calls) + "]"


def _check_text(h, parser_cls, text: str, rng: random.Random) -> None:
    want = h.key(parser_cls().parse(text))
    splits = [[], list(range(1, len(text)))]
    if len(text) > 1:
        splits += [sorted(rng.sample(range(1, len(text)), k=rng.randrange(len(text)))) for _ in range(2)]
    eager = set()
    for cuts in splits:
        assert h.key(h.check_events(h.stream(parser_cls, text, cuts, False))) == want, cuts
        eager.add(repr(h.key(h.check_events(h.stream(parser_cls, text, cuts, True)))))
    assert len(eager) == 1
    for _, arguments in want[1]:
        json.loads(arguments)


@pytest.mark.parametrize("name", format_names())
def test_markup_soup(harness, name):
    rng = random.Random(name)
    for _ in range(250):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 20)))
        _check_text(harness, get_format(name).parser, text, rng)


@pytest.mark.parametrize("name", format_names())
def test_valid_calls_and_truncations(harness, name):
    rng = random.Random(name)
    parser_cls = get_format(name).parser
    for _ in range(40):
        calls = [(rng.choice(["get_weather", "f"]), {f"p{i}": _value(rng) for i in range(rng.randrange(3))})
                 for _ in range(rng.randint(1, 3))]
        text = _render(name, calls, rng)
        parsed = parser_cls().parse(text)
        assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == calls and parsed.content is None
        _check_text(harness, parser_cls, text, rng)
        for cut in rng.sample(range(1, len(text)), k=min(6, len(text) - 1)):
            _check_text(harness, parser_cls, text[:cut], rng)
