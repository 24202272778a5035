"""Streaming behaviour beyond reassembly: when events leave (eager vs held), hold-back of possible tags,
and the parser's own lifecycle."""
from __future__ import annotations

import pytest

from conch.agents.tool_formats import format_names, get_format
from conch.agents.tools import ContentDelta, ToolCallDelta

LONG_CODE = "print('hello')\\n" * 40
HERMES_LONG = ('<tool_call>\n'
               f'{{"name": "write_file", "arguments": {{"path": "a.py", "code": "{LONG_CODE}"}}}}\n</tool_call>')


def _events_before_end(parser, text: str, end_marker: str) -> list:
    """Feed char by char; return the events that left before `end_marker` was complete."""
    stop = text.index(end_marker) + len(end_marker) - 1
    events = []
    for ch in text[:stop]:
        events += parser.feed(ch)
    return events


def test_eager_streams_long_arguments_as_they_arrive():
    parser = get_format("hermes").parser(eager=True)
    events = _events_before_end(parser, HERMES_LONG, '"}}')
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert deltas[0].name == "write_file" and deltas[0].id
    assert len(deltas) > 100  # one fragment per character fed, not one blob at the end
    assert "".join(d.arguments_fragment for d in deltas) == '{"path":"a.py","code":"' + LONG_CODE + '"}'


def test_held_sends_each_call_once_its_text_is_complete():
    parser = get_format("hermes").parser()
    assert _events_before_end(parser, HERMES_LONG, "</tool_call>") == []
    events = parser.feed(">")
    assert [type(e) for e in events] == [ToolCallDelta, ToolCallDelta]
    assert events[1].arguments_fragment.endswith(f'"code":"{LONG_CODE}"}}')


def test_held_sends_first_of_parallel_calls_before_second_arrives():
    text = ('[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {"y": 2}}]')
    parser = get_format("mistral").parser()
    events = parser.feed(text[:text.index(", {")])
    assert [e.name for e in events if isinstance(e, ToolCallDelta) and e.is_first] == ["a"]


@pytest.mark.parametrize(("name", "text", "held"), [
    ("hermes", "Sure <tool_", " <tool_"), ("mistral", "Sure [TOOL_CA", " [TOOL_CA"),
    ("llama3", "Sure <|python_", " <|python_"), ("hermes", "Sure\n\n", "\n\n"),
])
def test_possible_markup_and_whitespace_are_held_back(name, text, held):
    parser = get_format(name).parser()
    assert parser.feed(text) == [ContentDelta(text[:-len(held)])]
    assert parser.finish() == [ContentDelta(held)]


def test_content_streams_without_waiting_for_the_end():
    parser = get_format("hermes").parser()
    assert parser.feed("The weather in ") == [ContentDelta("The weather in")]
    assert parser.feed("Paris is mild.") == [ContentDelta(" Paris is mild.")]


@pytest.mark.parametrize("name", format_names())
def test_parse_leaves_stream_state_alone_and_feed_after_finish_fails(name):
    parser = get_format(name).parser()
    events = parser.feed("Hello")
    assert parser.parse("something else entirely").content == "something else entirely"
    events += parser.finish()
    assert events == [ContentDelta("Hello")]
    with pytest.raises(RuntimeError):
        parser.feed("more")


@pytest.mark.parametrize("name", format_names())
def test_empty_and_plain_text(name):
    parser_cls = get_format(name).parser
    assert parser_cls().parse("").content is None
    assert parser_cls().parse("").tool_calls == []
    assert parser_cls().parse("Just an answer.").content == "Just an answer."
