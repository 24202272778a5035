"""Finding where tool-call markup begins inside content text that arrives in pieces.

Invariant: a character is released as content only once no continuation of the text could make it part of
a marker (the tail that is a proper prefix of a marker is held), and whitespace is held until the next
non-whitespace character shows whether it borders a call (then it is dropped) or more content (then kept).
"""
from __future__ import annotations

from collections.abc import Sequence

WHITESPACE = " \t\n\r"


def find_marker(text: str, pos: int, markers: Sequence[str]) -> tuple[int, str] | None:
    """The earliest complete marker in text[pos:], as (start, marker); the longer one on a tie."""
    best: tuple[int, str] | None = None
    for marker in markers:
        start = text.find(marker, pos)
        if start >= 0 and (best is None or (start, -len(marker)) < (best[0], -len(best[1]))):
            best = (start, marker)
    return best


def held_from(text: str, pos: int, markers: Sequence[str]) -> int:
    """Where the held tail of text[pos:] starts: a possible marker start, and the whitespace before it."""
    start = len(text)
    for marker in markers:
        for size in range(min(len(marker) - 1, len(text) - pos), 0, -1):
            if text.endswith(marker[:size]):
                start = min(start, len(text) - size)
                break
    while start > pos and text[start - 1] in WHITESPACE:
        start -= 1
    return start


def skip_whitespace(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in WHITESPACE:
        pos += 1
    return pos


def match_literal(text: str, pos: int, literal: str) -> int | None:
    """How `literal` fares at text[pos:]: its length if all there, 0 if text ends inside a prefix of it,
    None if it does not match."""
    available = text[pos:pos + len(literal)]
    if available == literal:
        return len(literal)
    return 0 if literal.startswith(available) else None
