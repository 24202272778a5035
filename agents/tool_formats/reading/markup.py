"""The states that formats built of literal markup share (DeepSeek, Kimi-K2, harmony, Qwen3-Coder, GLM-4.5):
a literal, one of several literals, a name up to a literal, JSON arguments, raw text up to a literal; and the
section of calls DeepSeek and Kimi-K2 both write (CallSectionParser).

Each helper is a state body: it consumes from `_pos`, sets the next state and returns True, or returns False to
wait for more text (never after finish()), or fails the call region (its text given back as content). A state
that takes arguments is set as a closure: `self._state = lambda: self._expect(END, self._after_call)`.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import ClassVar

from conch.agents.tool_formats.reading.content import match_literal, skip_whitespace
from conch.agents.tool_formats.reading.json_reader import JsonReader
from conch.agents.tool_formats.reading.parser import State, ToolParser
from conch.agents.tool_formats.reading.reader import run_end

NAME_RUN = re.compile(r"[A-Za-z0-9_.\-:]*")


class MarkupParser(ToolParser):
    _args: JsonReader

    def _wait_or_fail(self) -> bool:
        """The text ends inside what is being read: wait, or (after finish()) fail there."""
        return self._fail(len(self._buf)) if self._final else False

    def _expect(self, literal: str, then: State, *, skip_ws: bool = True) -> bool:
        pos = skip_whitespace(self._buf, self._pos) if skip_ws else self._pos
        matched = match_literal(self._buf, pos, literal)
        if matched is None:
            return self._fail(pos)
        if matched == 0:
            return self._wait_or_fail()
        self._pos, self._state = pos + matched, then
        return True

    def _branch(self, options: Sequence[tuple[str, State]], *, at_end: State | None = None,
                skip_ws: bool = True) -> bool:
        """One of several literals (after whitespace); the end of the text goes to `at_end` where given."""
        pos = skip_whitespace(self._buf, self._pos) if skip_ws else self._pos
        if pos == len(self._buf) and self._final and at_end is not None:
            self._pos, self._state = pos, at_end
            return True
        waiting = False
        for literal, then in options:
            matched = match_literal(self._buf, pos, literal)
            if matched:
                self._pos, self._state = pos + matched, then
                return True
            waiting = waiting or matched == 0
        return self._wait_or_fail() if waiting else self._fail(pos)

    def _name_until(self, end: str, then: State, *, name_of: Callable[[str], str | None] = lambda n: n) -> bool:
        """A function name (a run of NAME_RUN, whitespace around it) up to the literal `end`: a new call."""
        return self._name_before(((end, then),), name_of=name_of)

    def _name_before(self, options: Sequence[tuple[str, State]], *,
                     name_of: Callable[[str], str | None] = lambda n: n) -> bool:
        """A function name, then (after whitespace) one of the literals of `options`."""
        start = skip_whitespace(self._buf, self._pos)
        stop = run_end(NAME_RUN, self._buf, start)
        pos = skip_whitespace(self._buf, stop)
        if pos == len(self._buf):
            return self._wait_or_fail()
        waiting = False
        for literal, then in options:
            matched = match_literal(self._buf, pos, literal)
            waiting = waiting or matched == 0
            if matched:
                name = name_of(self._buf[start:stop])
                if not name:
                    return self._fail(pos)
                self._new_sink().set_name(name)
                self._pos, self._state = pos + matched, then
                return True
        return self._wait_or_fail() if waiting else self._fail(pos)

    def _json_arguments(self, then: State) -> bool:
        """Start reading a JSON object of arguments; `then` once it is whole."""
        self._args = JsonReader()
        self._state = lambda: self._read_json(then)
        return True

    def _read_json(self, then: State) -> bool:
        self._pos = self._args.feed(self._buf, self._pos)
        if self._args.kind not in (None, "{"):
            return self._fail(self._pos)
        assert self._sink is not None
        self._sink.add_arguments(self._args.take())
        if self._args.failed:
            return self._fail(self._pos)
        if not self._args.done:
            return self._wait_or_fail()
        self._state = then
        return True

    def _text_until(self, end: str) -> str | None:
        """The text from `_pos` up to `end` (consumed through it), or None while `end` is not there yet."""
        at = self._buf.find(end, self._pos)
        if at < 0:
            return None
        text, self._pos = self._buf[self._pos:at], at + len(end)
        return text


class CallSectionParser(MarkupParser):
    """A section of calls between special tokens (DeepSeek, Kimi-K2): after the section's opening marker each
    call is CALL_BEGIN, the format's own `_call`, CALL_END; then another call, SECTION_END, or the end of the
    text (a model may stop before the section's end)."""

    CALL_BEGIN: ClassVar[str]
    CALL_END: ClassVar[str]
    SECTION_END: ClassVar[str]

    def _on_marker(self, marker: str) -> None:
        self._state = lambda: self._expect(self.CALL_BEGIN, self._call)

    def _call(self) -> bool:
        raise NotImplementedError

    def _call_end(self) -> bool:
        return self._expect(self.CALL_END, self._called)

    def _called(self) -> bool:
        self._complete(region_open=True)
        self._state = self._next
        return True

    def _next(self) -> bool:
        return self._branch(((self.CALL_BEGIN, self._call), (self.SECTION_END, self._end_region)),
                            at_end=self._end_region)
