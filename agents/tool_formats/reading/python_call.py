"""Python-literal calls, `get_weather(city="Paris", days=3)`, for the pythonic format.

Two halves: `CallScanner` finds where one call expression ends in streamed text (bracket- and
string-aware, so a ')' inside "a (quoted) string" does not end it); `literal_call` turns the finished
expression into (name, canonical arguments) with `ast`, accepting keyword arguments whose values are
literals only: str, int, float, bool, None, lists/tuples, dicts with str keys, and the JSON spellings
true/false/null. Anything else (positional arguments, names, calls, f-strings, sets, bytes) is not a call.
"""
from __future__ import annotations

import ast
import enum
import re
from typing import Any

from conch.agents.tools.canonical import dumps
from conch.agents.tool_formats.reading.reader import Reader, run_end

_BODY_RUN = re.compile(r"""[^'"()\[\]{}#\\]+""")
_STRING_RUN = re.compile(r"""[^'"\\]+""")
_CLOSERS = {")": "(", "]": "[", "}": "{"}
_JSON_NAMES = {"true": True, "false": False, "null": None}


class _Mode(enum.Enum):
    HEAD = enum.auto()     # the dotted function name, then '('
    BODY = enum.auto()     # inside the parentheses
    STRING = enum.auto()   # inside a string literal opened by self._quote
    DONE = enum.auto()
    FAILED = enum.auto()


class CallScanner(Reader, modes=_Mode):
    """Consumes one `name(...)` expression. Invariant: `text` is exactly what it consumed."""

    def __init__(self) -> None:
        self._mode = _Mode.HEAD
        self._stack: list[str] = []  # open brackets, innermost last
        self._quote = ""
        self._head_chars = 0  # characters of the dotted name read so far
        self.text = ""

    def feed(self, buf: str, pos: int, final: bool) -> int:
        """Consume buf[pos:] up to the call's closing ')'; return the first index not consumed."""
        start = pos
        steps = {_Mode.HEAD: self._head, _Mode.BODY: self._body, _Mode.STRING: self._string}
        while pos < len(buf) and self._mode in steps:
            new_pos = steps[self._mode](buf, pos, final)
            if new_pos == pos and self._mode is not _Mode.FAILED:
                break  # waiting for lookahead (a possible triple quote, an escape)
            pos = new_pos
        self.text += buf[start:pos]
        return pos

    def _head(self, buf: str, pos: int, final: bool) -> int:
        ch = buf[pos]
        if ch == "(" and self._head_chars:
            self._mode, self._stack = _Mode.BODY, ["("]
            return pos + 1
        starts_name = ch.isalpha() or ch == "_"
        if starts_name or self._head_chars and (ch.isalnum() or ch in "_. \t"):
            self._head_chars += 1
            return pos + 1
        return self._fail(pos)

    def _body(self, buf: str, pos: int, final: bool) -> int:
        ch = buf[pos]
        if ch in "'\"":
            if pos + 3 > len(buf) and not final:
                return pos  # one or two quotes so far: a triple quote may be coming
            self._quote = ch * 3 if buf.startswith(ch * 3, pos) else ch
            self._mode = _Mode.STRING
            return pos + len(self._quote)
        if ch in "([{":
            self._stack.append(ch)
            return pos + 1
        if ch in _CLOSERS:
            if self._stack[-1] != _CLOSERS[ch]:
                return self._fail(pos)
            self._stack.pop()
            if not self._stack:
                self._mode = _Mode.DONE
            return pos + 1
        if ch in "#\\":  # comments and line continuations have no place in a literal call
            return self._fail(pos)
        return run_end(_BODY_RUN, buf, pos)

    def _string(self, buf: str, pos: int, final: bool) -> int:
        ch = buf[pos]
        if ch == "\\":
            if pos + 2 > len(buf):
                return self._fail(pos) if final else pos
            return pos + 2  # an escaped character never closes the string
        if buf.startswith(self._quote, pos):
            self._mode = _Mode.BODY
            return pos + len(self._quote)
        if ch in "'\"":
            if len(self._quote) == 3 and pos + 3 > len(buf) and not final:
                return pos  # may be the start of the closing triple quote
            return pos + 1
        return run_end(_STRING_RUN, buf, pos)


def literal_call(source: str) -> tuple[str, str] | None:
    """(dotted name, canonical JSON arguments) of a literal keyword call, or None if it is not one."""
    try:
        node = ast.parse(source.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(node, ast.Call) or node.args:
        return None
    name = _dotted_name(node.func)
    if name is None or any(keyword.arg is None for keyword in node.keywords):
        return None
    try:
        arguments = {keyword.arg: _literal(keyword.value) for keyword in node.keywords}
        return name, dumps(arguments)
    except (ValueError, TypeError, RecursionError):
        return None


def _dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _literal(node: ast.expr) -> Any:
    """The JSON-able value of a literal node; ValueError for anything else."""
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (str, bool, int, float))):
        return node.value
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _literal(node.operand)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("sign on a non-number")
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        if not all(isinstance(key, ast.Constant) and isinstance(key.value, str) for key in node.keys):
            raise ValueError("dict keys must be strings")
        pairs = zip(node.keys, node.values, strict=True)
        return {key.value: _literal(value) for key, value in pairs}  # type: ignore[union-attr]
    raise ValueError(f"not a literal: {ast.dump(node)}")
