"""Reads one JSON call object, `{"name": "f", "arguments": {...}}`, as hermes, llama3 and mistral write it.

Accepted: the arguments under "arguments" or "parameters", as an object or as a string holding a JSON object
(some fine-tunes double-encode); no arguments at all means `{}`; any other key (mistral's "id"...) is read,
validated and ignored; keys in any order. Rejected (the reader fails at the offending character): anything
that is not JSON, a name that is not a non-empty string, arguments that are not an object, a repeated name or
arguments key, a missing name, and missing arguments where the format demands them (`require_arguments`,
for bare JSON that might be an ordinary answer).
Invariant: object-valued arguments reach the sink as the reader certifies them (so an eager sink streams
them); everything else reaches it only once the object is complete.
"""
from __future__ import annotations

import enum
import json
import re

from conch.agents.tool_formats.reading.json_reader import JsonReader, canonical_object
from conch.agents.tool_formats.reading.call_sink import CallSink
from conch.agents.tool_formats.reading.reader import Reader, run_end

ARGUMENT_KEYS = frozenset({"arguments", "parameters"})
_WS_RUN = re.compile(r"[ \t\n\r]*")


class _Mode(enum.Enum):
    OPEN = enum.auto()        # before '{'
    FIRST_KEY = enum.auto()   # after '{': a key or '}'
    KEY = enum.auto()         # self._reader is reading a key string
    COLON = enum.auto()
    VALUE = enum.auto()       # self._reader is reading the value of self._key
    AFTER = enum.auto()       # after a member: ',' or '}'
    NEXT_KEY = enum.auto()    # after ',': a key
    DONE = enum.auto()
    FAILED = enum.auto()


class CallObjectReader(Reader, modes=_Mode):
    def __init__(self, sink: CallSink, *, require_arguments: bool = False) -> None:
        self._sink = sink
        self._require_arguments = require_arguments
        self._mode = _Mode.OPEN
        self._reader = JsonReader()
        self._key = ""
        self._seen: set[str] = set()   # "name" and "arguments" once the call has them
        self._value_text: list[str] = []  # canonical text of a value the sink does not stream

    def feed(self, text: str, pos: int) -> int:
        """Consume text[pos:] up to the object's closing brace; return the first index not consumed."""
        end = len(text)
        while pos < end and self._mode is not _Mode.DONE and self._mode is not _Mode.FAILED:
            pos = self._step(text, pos)
        return pos

    def _step(self, text: str, pos: int) -> int:
        if self._mode is _Mode.KEY:
            return self._read_key(text, pos)
        if self._mode is _Mode.VALUE:
            return self._read_value(text, pos)
        pos = run_end(_WS_RUN, text, pos)
        if pos == len(text):
            return pos
        return self._punctuation(text[pos], pos)

    def _punctuation(self, ch: str, pos: int) -> int:
        mode = self._mode
        if mode is _Mode.OPEN and ch == "{":
            self._mode = _Mode.FIRST_KEY
        elif mode in (_Mode.FIRST_KEY, _Mode.NEXT_KEY) and ch == '"':
            self._mode, self._reader = _Mode.KEY, JsonReader()
            return pos  # the key reader consumes the quote
        elif mode in (_Mode.FIRST_KEY, _Mode.AFTER) and ch == "}":
            return self._close(pos)
        elif mode is _Mode.COLON and ch == ":":
            self._mode, self._reader = _Mode.VALUE, JsonReader()
        elif mode is _Mode.AFTER and ch == ",":
            self._mode = _Mode.NEXT_KEY
        else:
            return self._fail(pos)
        return pos + 1

    def _read_key(self, text: str, pos: int) -> int:
        pos = self._reader.feed(text, pos)
        if self._reader.failed:
            return self._fail(pos)
        if self._reader.done:
            key = json.loads(self._reader.take())
            self._key = "arguments" if key in ARGUMENT_KEYS else key
            if self._key in self._seen:
                return self._fail(pos)
            self._mode = _Mode.COLON
        return pos

    def _read_value(self, text: str, pos: int) -> int:
        pos = self._reader.feed(text, pos)
        if not self._kind_fits():
            return self._fail(pos)
        piece = self._reader.take()  # certified canonical text, even if the reader failed just after it
        if self._key == "arguments" and self._reader.kind == "{":
            self._sink.add_arguments(piece)  # so an eager sink may stream it
        elif self._key in ("name", "arguments"):
            self._value_text.append(piece)
        if self._reader.failed:
            return self._fail(pos)
        if self._reader.done:
            if not self._member_done():
                return self._fail(pos)
            self._mode = _Mode.AFTER
        return pos

    def _kind_fits(self) -> bool:
        kind = self._reader.kind
        if kind is None or self._key not in ("name", "arguments"):
            return True
        return kind == '"' or (kind == "{" and self._key == "arguments")

    def _member_done(self) -> bool:
        self._seen.add(self._key)
        text, self._value_text = "".join(self._value_text), []
        if self._key == "name":
            name = json.loads(text)
            if not name:
                return False
            self._sink.set_name(name)
        elif self._key == "arguments" and self._reader.kind == '"':
            arguments = canonical_object(json.loads(text))
            if arguments is None:
                return False
            self._sink.add_arguments(arguments)
        return True

    def _close(self, pos: int) -> int:
        if "name" not in self._seen:
            return self._fail(pos)
        if "arguments" not in self._seen:
            if self._require_arguments:
                return self._fail(pos)
            self._sink.add_arguments("{}")
        self._mode = _Mode.DONE
        return pos + 1
