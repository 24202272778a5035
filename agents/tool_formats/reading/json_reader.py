"""An incremental JSON reader: it consumes exactly one JSON value from text that arrives in pieces split
anywhere, validates it, and writes the value's canonical text (see canonical.py) as soon as each piece of it
is certain: structure at once, string contents as they arrive, numbers and literals once complete.

Invariants:
  - `take()`s concatenated so far are a prefix of the canonical text of the value (a valid value's whole
    canonical text once `done`); what comes out never depends on how the input was split.
  - `feed` never consumes a character past the end of the value, and stops *at* the first character that
    makes the text invalid JSON (`failed`), so callers can hand that character to someone else.
Leniency, the only one: raw control characters inside strings (literal newlines, as models write in code)
are accepted, as `json.loads(strict=False)` does, and written escaped. NaN/Infinity are rejected.
"""
from __future__ import annotations

import enum
import re

from conch.agents.tools.canonical import encode_string_body
from conch.agents.tool_formats.reading.reader import Reader, run_end

MAX_DEPTH = 128
_WS_RUN = re.compile(r"[ \t\n\r]*")
_STRING_RUN = re.compile(r'[^"\\\x00-\x1f\ud800-\udfff]+')  # characters canonical form writes as they are
_NUMBER_RUN = re.compile(r"[0-9eE+\-.]+")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\Z")
_HEX = frozenset("0123456789abcdefABCDEF")
_LITERALS = {"t": "true", "f": "false", "n": "null"}
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class _Mode(enum.Enum):
    VALUE = enum.auto()       # a value starts here (after optional whitespace)
    FIRST_ITEM = enum.auto()  # just after '[': a value or ']'
    FIRST_KEY = enum.auto()   # just after '{': a key or '}'
    KEY = enum.auto()         # after ',' in an object: a key
    COLON = enum.auto()
    AFTER = enum.auto()       # after a value inside a container: ',' or the container's closer
    STRING = enum.auto()
    ESCAPE = enum.auto()      # self._token holds the escape read so far, from its backslash
    NUMBER = enum.auto()      # self._token holds the number read so far
    LITERAL = enum.auto()     # self._token holds the prefix of self._literal read so far
    DONE = enum.auto()
    FAILED = enum.auto()


class JsonReader(Reader, modes=_Mode):
    """Reads one JSON value. `kind` is the first character of the value once it has started."""

    _mode: _Mode

    def __init__(self) -> None:
        self._mode = _Mode.VALUE
        self._stack: list[str] = []   # the open containers' closers, innermost last; len <= MAX_DEPTH
        self._in_key = False          # the string being read is an object key
        self._token = ""
        self._literal = ""
        self._high: int | None = None  # a \uD8xx escape waiting to learn whether a low surrogate follows
        self._out: list[str] = []
        self.kind: str | None = None

    def take(self) -> str:
        """The canonical text written since the last take."""
        text = "".join(self._out)
        self._out.clear()
        return text

    def feed(self, text: str, pos: int) -> int:
        """Consume text[pos:] up to the end of the value; return the index of the first character not consumed."""
        end = len(text)
        while pos < end and self._mode is not _Mode.DONE and self._mode is not _Mode.FAILED:
            pos = _STEPS[self._mode](self, text, pos)
        return pos

    # -- structure -------------------------------------------------------------------------------------

    def _value(self, text: str, pos: int) -> int:
        pos = run_end(_WS_RUN, text, pos)
        if pos == len(text):
            return pos
        ch = text[pos]
        if self.kind is None:
            self.kind = ch
        if ch == "{" or ch == "[":
            return self._open(ch, pos)
        if ch == '"':
            return self._start_string(pos, key=False)
        if ch in "-0123456789":
            self._token, self._mode = "", _Mode.NUMBER
            return pos
        if ch in _LITERALS:
            self._literal, self._token, self._mode = _LITERALS[ch], "", _Mode.LITERAL
            return pos
        return self._fail(pos)

    def _open(self, ch: str, pos: int) -> int:
        if len(self._stack) == MAX_DEPTH:
            return self._fail(pos)
        self._stack.append("}" if ch == "{" else "]")
        self._out.append(ch)
        self._mode = _Mode.FIRST_KEY if ch == "{" else _Mode.FIRST_ITEM
        return pos + 1

    def _close(self, pos: int) -> int:
        self._out.append(self._stack.pop())
        self._value_done()
        return pos + 1

    def _value_done(self) -> None:
        self._mode = _Mode.AFTER if self._stack else _Mode.DONE

    def _first_item(self, text: str, pos: int) -> int:
        pos = run_end(_WS_RUN, text, pos)
        if pos == len(text):
            return pos  # still FIRST_ITEM: a ']' may come next
        if text[pos] == "]":
            return self._close(pos)
        self._mode = _Mode.VALUE
        return pos

    def _first_key(self, text: str, pos: int) -> int:
        pos = run_end(_WS_RUN, text, pos)
        if pos == len(text):
            return pos  # still FIRST_KEY: a '}' may come next
        if text[pos] == "}":
            return self._close(pos)
        return self._key(text, pos)

    def _key(self, text: str, pos: int) -> int:
        pos = run_end(_WS_RUN, text, pos)
        if pos == len(text):
            self._mode = _Mode.KEY
            return pos
        return self._start_string(pos, key=True) if text[pos] == '"' else self._fail(pos)

    def _colon(self, text: str, pos: int) -> int:
        pos = run_end(_WS_RUN, text, pos)
        if pos == len(text):
            return pos
        if text[pos] != ":":
            return self._fail(pos)
        self._out.append(":")
        self._mode = _Mode.VALUE
        return pos + 1

    def _after(self, text: str, pos: int) -> int:
        pos = run_end(_WS_RUN, text, pos)
        if pos == len(text):
            return pos
        ch = text[pos]
        if ch == self._stack[-1]:
            return self._close(pos)
        if ch != ",":
            return self._fail(pos)
        self._out.append(",")
        self._mode = _Mode.KEY if self._stack[-1] == "}" else _Mode.VALUE
        return pos + 1

    # -- scalars ---------------------------------------------------------------------------------------

    def _start_string(self, pos: int, key: bool) -> int:
        self._in_key, self._mode = key, _Mode.STRING
        self._out.append('"')
        return pos + 1

    def _string(self, text: str, pos: int) -> int:
        ch = text[pos]
        if ch == "\\":
            self._token, self._mode = "\\", _Mode.ESCAPE
            return pos + 1
        self._flush_high()
        if ch == '"':
            self._out.append('"')
            if self._in_key:
                self._mode = _Mode.COLON
            else:
                self._value_done()
            return pos + 1
        run = _STRING_RUN.match(text, pos)
        if run is None:  # a raw control character or surrogate: written escaped
            self._out.append(encode_string_body(ch))
            return pos + 1
        self._out.append(run.group())
        return run.end()

    def _escape(self, text: str, pos: int) -> int:
        ch = text[pos]
        if self._token == "\\" and ch in _SIMPLE_ESCAPES:
            self._flush_high()
            self._out.append(encode_string_body(_SIMPLE_ESCAPES[ch]))
            self._mode = _Mode.STRING
            return pos + 1
        if ch not in (_HEX if len(self._token) > 1 else "u"):
            return self._fail(pos)
        self._token += ch
        if len(self._token) == 6:  # \uXXXX complete
            self._code_point(int(self._token[2:], 16))
            self._mode = _Mode.STRING
        return pos + 1

    def _code_point(self, code: int) -> None:
        """A \\uXXXX escape: pairs a high surrogate with the low one after it, as json.loads does."""
        if 0xD800 <= code < 0xDC00:
            self._flush_high()
            self._high = code
        elif 0xDC00 <= code < 0xE000 and self._high is not None:
            self._out.append(chr(0x10000 + ((self._high - 0xD800) << 10) + (code - 0xDC00)))
            self._high = None
        else:
            self._flush_high()
            self._out.append(encode_string_body(chr(code)))

    def _flush_high(self) -> None:
        if self._high is not None:
            self._out.append(f"\\u{self._high:04x}")  # a lone surrogate stays an escape
            self._high = None

    def _number(self, text: str, pos: int) -> int:
        run = _NUMBER_RUN.match(text, pos)
        if run is not None:
            self._token += run.group()
            if run.end() == len(text):
                return run.end()  # the number may go on in the next piece
            pos = run.end()
        if _NUMBER.match(self._token) is None:
            return self._fail(pos)
        self._out.append(self._token)  # numbers are kept exactly as written
        self._value_done()
        return pos

    def _literal_char(self, text: str, pos: int) -> int:
        if text[pos] != self._literal[len(self._token)]:
            return self._fail(pos)
        self._token += text[pos]
        if self._token == self._literal:
            self._out.append(self._literal)
            self._value_done()
        return pos + 1


_STEPS = {
    _Mode.VALUE: JsonReader._value,
    _Mode.FIRST_ITEM: JsonReader._first_item,
    _Mode.FIRST_KEY: JsonReader._first_key,
    _Mode.KEY: JsonReader._key,
    _Mode.COLON: JsonReader._colon,
    _Mode.AFTER: JsonReader._after,
    _Mode.STRING: JsonReader._string,
    _Mode.ESCAPE: JsonReader._escape,
    _Mode.NUMBER: JsonReader._number,
    _Mode.LITERAL: JsonReader._literal_char,
}


def canonical_object(text: str) -> str | None:
    """The canonical text of `text` if it is exactly one JSON object (surrounding whitespace allowed)."""
    reader = JsonReader()
    end = reader.feed(text, 0)
    if not reader.done or reader.kind != "{" or text[end:].strip(" \t\n\r"):
        return None
    return reader.take()
