"""Hermes / Qwen, and Conch's default: one `<tool_call>` block per call, a newline between blocks.

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

The parser reads:

    optional text <tool_call>{"name": "f", "arguments": {...}}</tool_call> <tool_call>...</tool_call> ...

Each call sits in its own tag pair, with text possibly before, between or after. A call is valid once its
closing tag is seen; at the end of the text a missing (or cut) closing tag is forgiven if the JSON object is
complete. A tag pair whose inside is not a valid call object is content, tags included.
"""
from __future__ import annotations

from conch.agents.tool_formats.json_call import JsonCallFormat
from conch.agents.tool_formats.reading.call_object import CallObjectReader
from conch.agents.tool_formats.reading.content import match_literal, skip_whitespace
from conch.agents.tool_formats.reading.parser import ToolParser

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"


class HermesParser(ToolParser):
    name = "hermes"
    MARKERS = (OPEN_TAG,)
    _reader: CallObjectReader

    def _on_marker(self, marker: str) -> None:
        self._reader = CallObjectReader(self._new_sink())
        self._state = self._read_call

    def _read_call(self) -> bool:
        if (waiting := self._feed_call(self._reader)) is not None:
            return waiting
        self._state = self._close_tag
        return True

    def _close_tag(self) -> bool:
        pos = skip_whitespace(self._buf, self._pos)
        matched = match_literal(self._buf, pos, CLOSE_TAG)
        if matched is None:
            return self._fail(pos)
        if matched == 0 and not self._final:
            return False
        self._pos = len(self._buf) if matched == 0 else pos + matched
        self._complete()
        return self._end_region()


class HermesFormat(JsonCallFormat):
    name = "hermes"
    parser = HermesParser
    INSTRUCTION = ("To call functions, answer with one block per call and nothing else:\n<tool_call>\n"
                   '{"name": <function name>, "arguments": <arguments object>}\n</tool_call>')
    CALL_OPEN = OPEN_TAG + "\n"
    CALL_CLOSE = "\n" + CLOSE_TAG
    SEPARATOR = "\n"
