"""Mistral's array form: `[TOOL_CALLS]` and a JSON list of call objects.

    [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": ..., "arguments": ...}]

The grammar spells `[TOOL_CALLS]` as text; a Mistral tokenizer's special token of that name decodes to the
same text, which is what the parser reads.

The parser reads it, and the newer forms:

    text [TOOL_CALLS][{"name": "f", "arguments": {...}}, {"name": "g", "arguments": {...}, "id": "..."}]
    text [TOOL_CALLS]f[ARGS]{...}[TOOL_CALLS]g[ARGS]{...}        (v11+ tokenizers)
    [TOOL_CALLS]f[CALL_ID]a1b2c3d4e[ARGS]{...}                   (with a model-made id, ignored)
    [TOOL_CALLS]f{...}                                           (the same, special tokens skipped)

In the array form each element becomes a call as soon as it is complete; if a later element breaks, the
text from the end of the last good call is content. A missing closing ']' at the end of the text is
forgiven. Model-made ids are ignored: Conch always issues its own `call_` ids.
"""
from __future__ import annotations

import re

from conch.agents.tool_formats.json_call import JsonCallFormat
from conch.agents.tool_formats.reading.call_object import CallObjectReader
from conch.agents.tool_formats.reading.content import match_literal, skip_whitespace
from conch.agents.tool_formats.reading.json_reader import JsonReader
from conch.agents.tool_formats.reading.parser import ToolParser
from conch.agents.tool_formats.reading.reader import run_end

TOOL_CALLS = "[TOOL_CALLS]"
ARGS = "[ARGS]"
CALL_ID = "[CALL_ID]"
_NAME_RUN = re.compile(r"[A-Za-z0-9_.\-]*")
_ID_RUN = re.compile(r"[A-Za-z0-9]*")


class MistralParser(ToolParser):
    name = "mistral"
    MARKERS = (TOOL_CALLS,)
    _reader: CallObjectReader   # the array or single-object form
    _in_array: bool
    _name: str                  # the name form, as read so far
    _args: JsonReader

    def _on_marker(self, marker: str) -> None:
        self._state = self._after_marker

    def _after_marker(self) -> bool:
        pos = skip_whitespace(self._buf, self._pos)
        if pos == len(self._buf):
            return self._fail(pos) if self._final else False
        ch = self._buf[pos]
        if ch == "[":
            self._pos, self._state = pos + 1, self._array_item
        elif ch == "{":
            self._begin_object(pos, in_array=False)
        elif run_end(_NAME_RUN, ch, 0):
            self._pos, self._name, self._state = pos, "", self._read_name
        else:
            return self._fail(pos)
        return True

    # -- [TOOL_CALLS][{...}, {...}] ----------------------------------------------------------------------

    def _array_item(self) -> bool:
        pos = skip_whitespace(self._buf, self._pos)
        if pos == len(self._buf):
            return self._fail(pos) if self._final else False
        if self._buf[pos] != "{":
            return self._fail(pos)
        self._begin_object(pos, in_array=True)
        return True

    def _begin_object(self, pos: int, in_array: bool) -> None:
        self._reader = CallObjectReader(self._new_sink())
        self._in_array, self._pos, self._state = in_array, pos, self._read_object

    def _read_object(self) -> bool:
        if (waiting := self._feed_call(self._reader)) is not None:
            return waiting
        self._complete(region_open=self._in_array)
        if not self._in_array:
            return self._end_region()
        self._state = self._array_next
        return True

    def _array_next(self) -> bool:
        return self._list_separator(self._array_item)

    # -- [TOOL_CALLS]name[CALL_ID]id[ARGS]{...} --------------------------------------------------------

    def _read_name(self) -> bool:
        end = run_end(_NAME_RUN, self._buf, self._pos)
        self._name += self._buf[self._pos:end]
        self._pos = end
        return self._before_args(allow_call_id=True)

    def _read_call_id(self) -> bool:
        self._pos = run_end(_ID_RUN, self._buf, self._pos)
        return self._before_args(allow_call_id=False)

    def _before_args(self, allow_call_id: bool) -> bool:
        """At the end of the name (or the id): the arguments open with '{', after [ARGS] or not."""
        pos = self._pos
        if pos == len(self._buf):
            return self._fail(pos) if self._final else False
        if self._buf[pos] == "{":
            return self._begin_arguments(pos)
        for literal in (ARGS, CALL_ID) if allow_call_id else (ARGS,):
            matched = match_literal(self._buf, pos, literal)
            if matched == 0:
                return self._fail(len(self._buf)) if self._final else False
            if matched and literal == ARGS:
                return self._begin_arguments(pos + matched)
            if matched:
                self._pos, self._state = pos + matched, self._read_call_id
                return True
        return self._fail(pos)

    def _begin_arguments(self, pos: int) -> bool:
        self._new_sink().set_name(self._name)
        self._args, self._pos, self._state = JsonReader(), pos, self._read_arguments
        return True

    def _read_arguments(self) -> bool:
        self._pos = self._args.feed(self._buf, self._pos)
        if self._args.kind not in (None, "{"):
            return self._fail(self._pos)
        self._sink.add_arguments(self._args.take())  # type: ignore[union-attr]
        if self._args.failed:
            return self._fail(self._pos)
        if self._args.done:
            self._complete()
            return self._end_region()
        return self._fail(len(self._buf)) if self._final else False


class MistralFormat(JsonCallFormat):
    name = "mistral"
    parser = MistralParser
    INSTRUCTION = ("To call functions, answer with [TOOL_CALLS] and a JSON list of the calls, and nothing else:\n"
                   '[TOOL_CALLS][{"name": <function name>, "arguments": <arguments object>}]')
    LIST_OPEN = TOOL_CALLS + "["
    LIST_CLOSE = "]"
    SEPARATOR = ", "
