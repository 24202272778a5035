"""Pythonic tool calls (Llama 3.2 / Llama 4 style): the message opens with a Python list of calls,

    [get_weather(city="Paris", unit="celsius"), get_time(tz="Europe/Paris")]

Calls are recognized only where the message opens (after whitespace); text after the closing ']' is
content. Each element becomes a call as soon as its closing ')' is seen and `ast` accepts it as a literal
keyword call (see python_call.py); if an element breaks, the text from the end of the last good call is
content. Arguments are `json.dumps` of the literal values (canonical form), so they are sent once per call,
never streamed in pieces (`eager` changes nothing here). A missing ']' at the end of the text is forgiven.
"""
from __future__ import annotations

from agents.tools.parsers.base import ToolParser
from agents.tools.parsers.content import skip_whitespace
from agents.tools.parsers.python_call import CallScanner, literal_call


class PythonicParser(ToolParser):
    name = "pythonic"
    MARKERS = ()
    _scanner: CallScanner

    def _start(self) -> bool:
        pos = skip_whitespace(self._buf, self._pos)
        if pos == len(self._buf) and not self._final:
            return False  # only whitespace so far: cannot tell yet
        if pos < len(self._buf) and self._buf[pos] == "[":
            self._seg, self._pos = pos, pos + 1  # leading whitespace borders a call: dropped
            self._state = self._element
        else:
            self._state = self._content
        return True

    def _element(self) -> bool:
        pos = skip_whitespace(self._buf, self._pos)
        if pos == len(self._buf):
            return self._fail(pos) if self._final else False
        if self._buf[pos] == "]" and self._calls:  # after a trailing comma: fine in Python
            self._pos = pos + 1
            return self._end_region()
        self._scanner, self._pos, self._state = CallScanner(), pos, self._read_element
        return True

    def _read_element(self) -> bool:
        self._pos = self._scanner.feed(self._buf, self._pos, self._final)
        if self._scanner.failed:
            return self._fail(self._pos)
        if not self._scanner.done:
            return self._fail(len(self._buf)) if self._final else False
        call = literal_call(self._scanner.text)
        if call is None:
            return self._fail(self._pos)
        sink = self._new_sink()
        sink.set_name(call[0])
        sink.add_arguments(call[1])
        self._complete(region_open=True)
        self._state = self._after_element
        return True

    def _after_element(self) -> bool:
        return self._list_separator(self._element)
