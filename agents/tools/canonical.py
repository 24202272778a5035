"""Conch's canonical argument form: the one text every parser, streaming or not, writes arguments in.

Canonical form = compact JSON:
  - no whitespace outside strings; separators exactly "," and ":";
  - strings escaped as `json.dumps(s, ensure_ascii=False)` escapes them (`\\"`, `\\\\`, `\\n`, `\\t`, `\\r`,
    `\\b`, `\\f`, other control characters as `\\u00xx`; everything else literal, non-ASCII included),
    except that a lone surrogate is written as a `\\uXXXX` escape so the text always encodes to UTF-8;
  - for JSON-speaking formats, object keys (duplicates included) and numbers exactly as the model wrote them;
    for Python-literal formats (pythonic), the value as `json.dumps` writes it.
So `json.loads(canonical) == json.loads(model_text)` and, for JSON without duplicate keys whose numbers are
already in Python's own spelling, `canonical == json.dumps(json.loads(model_text), ensure_ascii=False,
separators=(",", ":"))`.
"""
from __future__ import annotations

import json
import re
from typing import Any

# Exactly the characters json.dumps(ensure_ascii=False) escapes, plus surrogates.
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f\\"\ud800-\udfff]')
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    return _SHORT_ESCAPES.get(ch) or f"\\u{ord(ch):04x}"


def encode_string_body(text: str) -> str:
    """The canonical text of `text` inside a JSON string, quotes excluded. Per character, so
    encode(a + b) == encode(a) + encode(b) for any split between code points."""
    return _NEEDS_ESCAPE.sub(_escape, text)


def dumps(value: Any) -> str:
    """Canonical JSON of a Python value. Raises ValueError for NaN/infinity, TypeError for non-JSON types."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
