"""Shared checks for the tool-call parser tests: stream a text in every split, reassemble, compare.

A sample is one recorded model text with the result `parse` must give. `stream_check` is the contract:
for every fragment size 1..len(text) (and some random splits) the stream reassembles, through
`assemble` (which itself rejects a repeated name/id or an out-of-order index), to exactly `parse`.
"""
from __future__ import annotations

import json
import random
from types import SimpleNamespace
from typing import Any

import pytest

from conch.agents.tools import ContentDelta, ParsedOutput, StreamEvent, assemble
from conch.agents.tools.canonical import dumps
from conch.agents.tool_formats.reading.parser import ToolParser


def stream(parser_cls: type[ToolParser], text: str, cuts: list[int], eager: bool) -> list[StreamEvent]:
    parser = parser_cls(eager=eager)
    events: list[StreamEvent] = []
    for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True):
        events += parser.feed(text[start:end])
    return events + parser.finish()


def check_events(events: list[StreamEvent]) -> ParsedOutput:
    """Reassemble (contract-checked) and check what `assemble` does not: ids, empty first fragments,
    no empty events."""
    for event in events:
        if isinstance(event, ContentDelta):
            assert event.text
        elif event.is_first:
            assert event.id.startswith("call_") and len(event.id) >= 14 and event.id[5:].isalnum()
            assert event.arguments_fragment == ""
        else:
            assert event.id is None and event.arguments_fragment
    parsed = assemble(events)
    assert len({call.id for call in parsed.tool_calls}) == len(parsed.tool_calls)
    return parsed


def key(parsed: ParsedOutput) -> tuple[str | None, list[tuple[str, str]]]:
    return parsed.content, [(call.name, call.arguments) for call in parsed.tool_calls]


def all_splits(text: str, seed: int = 0) -> list[list[int]]:
    """Every uniform fragment size 1..len, then a few random splits."""
    splits = [list(range(size, len(text), size)) for size in range(1, len(text) + 1)]
    rng = random.Random(seed)
    for _ in range(12):
        splits.append(sorted(rng.sample(range(1, len(text)), k=rng.randint(1, max(1, len(text) // 4)))))
    return splits


def stream_check(parser_cls: type[ToolParser], text: str, content: str | None,
                 calls: list[tuple[str, dict[str, Any]]], eager_same: bool = True) -> None:
    """`eager_same=False` where the text breaks after an eager stream has already sent a call."""
    parsed = parser_cls().parse(text)
    assert parsed.content == content
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == calls
    assert [c.arguments for c in parsed.tool_calls] == [dumps(args) for _, args in calls]
    for eager in (False, True):
        seen = set()
        for cuts in all_splits(text):
            got = key(check_events(stream(parser_cls, text, cuts, eager)))
            seen.add(repr(got))
            if not eager or eager_same:
                assert got == key(parsed), (eager, cuts)
        assert len(seen) == 1, f"eager={eager}: reassembly depends on the split"
    if not eager_same:
        eager_result = key(assemble(stream(parser_cls, text, [], True)))
        assert eager_result != key(parsed), "marked eager_same=False but eager agrees with parse"


@pytest.fixture
def check_stream():
    return stream_check


@pytest.fixture
def stream_events():
    return stream


@pytest.fixture
def harness():
    """The helpers themselves, for tests that drive streams their own way."""
    return SimpleNamespace(stream=stream, check_events=check_events, key=key)
