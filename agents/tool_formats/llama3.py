"""Llama 3.x JSON calls: bare objects with the arguments under "parameters", opening the message, "; " between.

    {"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {...}}

The parser reads them, and the `<|python_tag|>` form:

    {"name": "f", "parameters": {...}}; {"name": "g", "parameters": {...}}
    <|python_tag|>{"name": "f", "parameters": {...}}

A bare object is a call only where the message opens (after whitespace); `<|python_tag|>` opens calls
anywhere. Calls follow one another separated by ";" (or only whitespace). Text after the last call is
content. An object that is not a call (no "name", or no "parameters"/"arguments": it may be an ordinary JSON
answer) is content, as it was written.
"""
from __future__ import annotations

from conch.agents.tool_formats.json_call import JsonCallFormat
from conch.agents.tool_formats.reading.call_object import CallObjectReader
from conch.agents.tool_formats.reading.content import skip_whitespace
from conch.agents.tool_formats.reading.parser import ToolParser

PYTHON_TAG = "<|python_tag|>"


class Llama3Parser(ToolParser):
    name = "llama3"
    MARKERS = (PYTHON_TAG,)
    _reader: CallObjectReader

    def _start(self) -> bool:
        pos = skip_whitespace(self._buf, self._pos)
        if pos == len(self._buf) and not self._final:
            return False  # only whitespace so far: cannot tell yet
        if pos < len(self._buf) and self._buf[pos] == "{":
            self._seg = self._pos = pos  # leading whitespace borders a call: dropped
            self._begin_call()
        else:
            self._state = self._content
        return True

    def _on_marker(self, marker: str) -> None:
        self._state = self._open_brace

    def _open_brace(self) -> bool:
        pos = skip_whitespace(self._buf, self._pos)
        if pos == len(self._buf):
            return self._fail(pos) if self._final else False
        if self._buf[pos] != "{":
            return self._fail(pos)
        self._pos = pos
        self._begin_call()
        return True

    def _begin_call(self) -> None:
        self._reader = CallObjectReader(self._new_sink(), require_arguments=True)
        self._state = self._read_call

    def _read_call(self) -> bool:
        if (waiting := self._feed_call(self._reader)) is not None:
            return waiting
        self._complete(region_open=True)
        self._state = self._separator
        return True

    def _separator(self) -> bool:
        """After a call: another call (dropping the separator), the end, or content (keeping it)."""
        pos = skip_whitespace(self._buf, self._pos)
        if pos < len(self._buf) and self._buf[pos] == ";":
            pos = skip_whitespace(self._buf, pos + 1)
        if pos == len(self._buf):
            if not self._final:
                return False
            self._pos = pos  # trailing separator and whitespace: dropped
            return self._end_region()
        if self._buf[pos] == "{":
            self._pos = pos  # the segment still starts at the separator: given back if this call breaks
            self._begin_call()
            return True
        return self._end_region()  # content follows, separator included


class Llama3Format(JsonCallFormat):
    name = "llama3"
    parser = Llama3Parser
    ARGUMENTS_KEY = "parameters"
    INSTRUCTION = ("To call functions, answer with one JSON object per call, separated by \"; \", and nothing "
                   'else:\n{"name": <function name>, "parameters": <arguments object>}')
    SEPARATOR = "; "
