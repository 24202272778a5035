"""Inline `%json{...}` schemas in Lark text (llguidance's extension, also read by xgrammar).

Found with a JSON decoder from each `%json`, so braces inside strings are no trouble. Each one
is checked like any schema (validate.py), and for llguidance given Conch's JSON whitespace, so a
tool-call grammar is as bounded as a plain JSON schema.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from .errors import GrammarError

_INLINE_JSON = re.compile(r"%json\s*")


def inline_schemas(lark: str) -> list[tuple[int, int, Any]]:
    """(start, end, schema) of every inline schema: lark[start:end] is its JSON text."""
    decoder, found = json.JSONDecoder(), []
    for match in _INLINE_JSON.finditer(lark):
        try:
            value, end = decoder.raw_decode(lark, match.end())
        except ValueError:
            raise GrammarError(f"the %json at offset {match.start()} is not followed by a JSON schema") from None
        found.append((match.end(), end, value))
    return found


def map_inline_schemas(lark: str, transform: Callable[[Any], Any]) -> str:
    """`lark` with each inline schema replaced by transform(schema), as compact JSON."""
    pieces, cursor = [], 0
    for start, end, schema in inline_schemas(lark):
        pieces += [lark[cursor:start], json.dumps(transform(schema), ensure_ascii=False, separators=(",", ":"))]
        cursor = end
    return "".join(pieces) + lark[cursor:]
