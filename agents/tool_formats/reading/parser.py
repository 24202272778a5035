"""The parser machine every format shares: buffering, content, call segments, failure, and parse().

A parser is a state machine over the model's text. Each state is a method that consumes from `_buf` at
`_pos` and returns True to be run again (it made progress or changed state) or False (it needs more text;
after `finish()` it must instead resolve, so the machine always ends with everything consumed).

Invariants:
  - decisions depend only on the text, never on how it was split: a state waits rather than guess;
  - every character ends up in exactly one place: content, a call, or dropped (whitespace bordering calls,
    markup such as `<tool_call>` tags of a valid call);
  - `_seg` is the start of the raw text not yet accounted for since a call region began: if the call being
    read turns out invalid, exactly that text is given back as content (unless an eager sink already sent it);
  - `parse(text)` is by definition the reassembly of this machine's own stream, so it equals the stream's
    reassembly for every split of the text.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from conch.agents.tools.assemble import assemble
from conch.agents.tool_formats.reading.call_object import CallObjectReader
from conch.agents.tool_formats.reading.call_sink import CallSink
from conch.agents.tool_formats.reading.content import WHITESPACE, find_marker, held_from, skip_whitespace
from conch.agents.tool_formats.reading.python_call import CallScanner, literal_call
from conch.agents.tools.types import ContentDelta, ParsedOutput, StreamEvent, ToolCallDelta, ToolFunction

State = Callable[[], bool]


class ToolParser:
    """Base class. Subclasses set `name` and `MARKERS` and implement `_on_marker` (and `_start`)."""

    name: ClassVar[str] = ""
    MARKERS: ClassVar[tuple[str, ...]] = ()  # markup that, inside content, opens a call region

    def __init__(self, *, eager: bool = False, tools: Sequence[ToolFunction] = ()) -> None:
        self.eager = eager
        self.tools = tuple(tools)     # what was offered: formats that write untyped text read types from it
        self._buf = ""
        self._pos = 0
        self._seg: int | None = None
        self._final = False
        self._events: list[StreamEvent] = []
        self._calls = 0               # calls sent so far; the next call's index
        self._after_call = False      # nothing but whitespace since the last call
        self._sink: CallSink | None = None
        self._state: State = self._start

    # -- the public face -------------------------------------------------------------------------------

    def parse(self, text: str) -> ParsedOutput:
        """Split a whole text into content and calls (always held: never a partial call). Leaves this
        parser's own streaming state alone."""
        machine = type(self)(tools=self.tools)
        return assemble(machine.feed(text) + machine.finish())

    def feed(self, delta: str) -> list[StreamEvent]:
        """Take the next piece of model text; return the events it made certain."""
        if self._final:
            raise RuntimeError("feed() after finish()")
        self._buf += delta
        self._run()
        return self._drain()

    def finish(self) -> list[StreamEvent]:
        """The text has ended: resolve whatever was held."""
        self._final = True
        self._run()
        if self._pos < len(self._buf):  # a safety net; no state should leave text behind
            self._emit_content(self._buf[self._pos:])
            self._pos = len(self._buf)
        return self._drain()

    # -- machinery for the formats ---------------------------------------------------------------------

    def _schema(self, name: str) -> dict[str, Any]:
        """The parameters schema of the offered tool `name` ({} if it was not offered)."""
        return next((t.schema for t in self.tools if t.name == name), {})

    def _start(self) -> bool:
        """The first state; formats whose calls may open the message override it."""
        self._state = self._content
        return True

    def _on_marker(self, marker: str) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while self._state():
            pass
        keep = self._pos if self._seg is None else self._seg
        self._buf = self._buf[keep:]
        self._pos -= keep
        if self._seg is not None:
            self._seg = 0

    def _content(self) -> bool:
        found = find_marker(self._buf, self._pos, self.MARKERS)
        if found is not None:
            start, marker = found
            self._emit_content(self._buf[self._pos:start].rstrip(WHITESPACE))
            self._seg, self._pos = start, start + len(marker)
            self._on_marker(marker)
            return True
        end = len(self._buf) if self._final else held_from(self._buf, self._pos, self.MARKERS)
        text = self._buf[self._pos:end]
        if not (self._final and self._after_call and not text.strip(WHITESPACE)):
            self._emit_content(text)
        self._pos = end
        return False

    def _emit_content(self, text: str) -> None:
        if text:
            self._events.append(ContentDelta(text))
            self._after_call = False

    def _new_sink(self) -> CallSink:
        self._sink = CallSink(self._calls, self.eager, self._events)
        return self._sink

    def _complete(self, *, region_open: bool = False) -> None:
        """The current call is whole and valid. `region_open`: more calls may follow in the same markup,
        so the raw text after this call is accounted from here."""
        assert self._sink is not None
        self._sink.complete()
        self._calls += 1
        self._sink = None
        self._after_call = True
        self._seg = self._pos if region_open else None

    def _list_separator(self, next_item: State) -> bool:
        """After an element of a `[call, call, ...]` list: ',' reads the next, ']' closes the region (and
        so does the end of the text, forgiving the missing ']')."""
        pos = skip_whitespace(self._buf, self._pos)
        if pos == len(self._buf):
            if not self._final:
                return False
            self._pos = pos
            return self._end_region()
        ch = self._buf[pos]
        if ch == ",":
            self._pos, self._state = pos + 1, next_item
            return True
        if ch != "]":
            return self._fail(pos)
        self._pos = pos + 1
        return self._end_region()

    def _python_call(self, scanner: CallScanner, after: State) -> bool:
        """Feeds the Python call `scanner` reads (pythonic lists, Gemma 3's blocks); once it is whole, the call
        is emitted and the parse goes on at `after`."""
        self._pos = scanner.feed(self._buf, self._pos, self._final)
        if scanner.failed:
            return self._fail(self._pos)
        if not scanner.done:
            return self._fail(len(self._buf)) if self._final else False
        call = literal_call(scanner.text)
        if call is None:
            return self._fail(self._pos)
        sink = self._new_sink()
        sink.set_name(call[0])
        sink.add_arguments(call[1])
        self._complete(region_open=True)
        self._state = after
        return True

    def _end_region(self) -> bool:
        """The call region closed cleanly (its closing markup, if any, consumed and dropped): content again."""
        self._seg = None
        self._state = self._content
        return True

    def _feed_call(self, reader: CallObjectReader) -> bool | None:
        """`reader` (the call being read) fed from `_pos`: None once its call is whole (the state goes on),
        else what the state returns: a failure, or False to wait for more text (a failure after finish())."""
        self._pos = reader.feed(self._buf, self._pos)
        if reader.failed:
            return self._fail(self._pos)
        if not reader.done:
            return self._fail(len(self._buf)) if self._final else False
        return None

    def _fail(self, at: int) -> bool:
        """The text from `_seg` is not a valid call: give it back as content up to `at`, go on from `at`."""
        assert self._seg is not None  # and at > _seg unless a committed sink consumed text: progress
        if self._sink is not None and self._sink.committed:  # eager: the partial call stands
            self._calls += 1
            self._after_call = True
        else:
            self._emit_content(self._buf[self._seg:at])
        self._sink, self._seg, self._pos = None, None, at
        self._state = self._content
        return True

    def _drain(self) -> list[StreamEvent]:
        events = _coalesce(self._events)
        self._events.clear()  # in place: the current sink appends to this same list
        return events


def _coalesce(events: list[StreamEvent]) -> list[StreamEvent]:
    """Merge adjacent content deltas, and adjacent later deltas of one call; first deltas stay alone."""
    merged: list[StreamEvent] = []
    for event in events:
        last = merged[-1] if merged else None
        if isinstance(event, ContentDelta) and isinstance(last, ContentDelta):
            merged[-1] = ContentDelta(last.text + event.text)
        elif (isinstance(event, ToolCallDelta) and isinstance(last, ToolCallDelta) and not event.is_first
              and not last.is_first and last.index == event.index):
            merged[-1] = ToolCallDelta(event.index, None, None, last.arguments_fragment + event.arguments_fragment)
        else:
            merged.append(event)
    return merged
