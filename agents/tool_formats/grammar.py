"""Lark pieces every format's forced-choice grammar is made of (llguidance's dialect, `%json{...}` inline).

A grammar is always

    start: LIST_OPEN call (SEPARATOR call (SEPARATOR call)?)? LIST_CLOSE     (1..max_calls calls)
    call: CALL_OPEN (fn_0 | fn_1 | ...) CALL_CLOSE                           (one rule per offered tool)
    fn_i: ... the format's own spelling of a call of tool i ...

so EOS is allowed after each complete call (the grammar accepts there) and nowhere else, and after the last
allowed call nothing but EOS (and LIST_CLOSE) remains.
"""
from __future__ import annotations

import json
from typing import Any

# Arguments are written on one line with fixed separators: a small model cannot wander into endless
# whitespace, and the text is already in the parsers' canonical spacing apart from the separators.
JSON_LAYOUT = {"whitespace_flexible": False, "key_separator": ": ", "item_separator": ", "}


def literal(text: str) -> str:
    """A Lark string literal matching exactly `text` (ASCII, non-ASCII characters as \\u escapes)."""
    return json.dumps(text)


def inline_json(schema: dict[str, Any]) -> str:
    """An llguidance inline schema: one JSON value valid under `schema`, in JSON_LAYOUT."""
    return "%json" + json.dumps({"x-guidance": JSON_LAYOUT, **schema}, ensure_ascii=False)


def calls_rule(count: int, separator: str) -> str:
    """1..count calls: `call (SEP call (SEP call)?)?` for count 3."""
    rule, between = "", f"{literal(separator)} " if separator else ""
    for _ in range(count - 1):
        rule = f" ({between}call{rule})?"
    return "call" + rule


def framed(open_text: str, body: str, close_text: str) -> str:
    """`body` between two literals, either of which may be empty (then left out)."""
    parts = [literal(open_text)] if open_text else []
    parts.append(body)
    if close_text:
        parts.append(literal(close_text))
    return " ".join(parts)
