"""JSON read with the bounds the HTTP body guard applies (gateway/bodies.py), for JSON that arrives inside a
text value, where no guard has seen it: Triton's `sampling_parameters` tensor, a list or object given as a
parameter's text, gRPC's string parameters.

Two things in valid JSON break Python's reader: nesting deep enough to exhaust the recursion limit
(RecursionError) and an integer literal past Python's int-to-text limit of 4,300 digits (ValueError). Both
are measured here before the parser runs, so every caller sees one ValueError that names the cause.
"""
from __future__ import annotations

import json
import re
import sys
from typing import Any

import numpy as np

MAX_JSON_DEPTH = 64
MAX_INT_DIGITS = sys.get_int_max_str_digits() or 4300      # 0 means no limit; keep a bound all the same
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
# only where a run of digits starts, so each run is scanned once (linear in the body, whatever its digits)
_LONG_DIGITS = re.compile(rb"(?<![0-9])[0-9]{%d}" % (MAX_INT_DIGITS + 1))


def json_depth(body: bytes) -> int:
    """The deepest nesting of [ and { outside strings (exact for valid JSON; an estimate for anything else)."""
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKET)
    if not brackets:
        return 0
    opens = np.frombuffer(brackets, np.uint8) & 2        # '[' 0x5B and '{' 0x7B have bit 1; ']' and '}' not
    return int(np.cumsum(opens.astype(np.int32) - 1).max())


_DIGITS_AS_ONES = bytes.maketrans(bytes(range(256)), bytes(49 if 48 <= b <= 57 else 48 for b in range(256)))
_LONG_RUN = b"1" * (MAX_INT_DIGITS + 1)


def long_integer(body: bytes) -> bool:
    """Whether `body` holds a number literal (outside strings) with more digits than Python reads. The common
    case, no run of that many digits anywhere, is a byte translation and a substring search (a 3 MB image data
    URL: ~3 ms, where a regex steps through every byte); only a long run is looked at outside strings."""
    if body.translate(_DIGITS_AS_ONES).find(_LONG_RUN) < 0:
        return False
    return _LONG_DIGITS.search(_STRING.sub(b"", body)) is not None


def problem(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Why `body` must not reach a JSON parser, or None."""
    if body.count(b"[") + body.count(b"{") > max_depth and json_depth(body) > max_depth:
        return f"nests JSON deeper than {max_depth} levels"
    if long_integer(body):
        return f"holds a number of more than {MAX_INT_DIGITS} digits"
    return None


def loads(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """json.loads within the bounds; raises ValueError (json.JSONDecodeError for text that is no JSON)."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    why = problem(raw, max_depth)
    if why is not None:
        raise ValueError(f"the value {why}")
    try:
        return json.loads(text)
    except RecursionError:                               # unreachable within the depth bound; kept as a backstop
        raise ValueError("the value nests JSON too deeply") from None
