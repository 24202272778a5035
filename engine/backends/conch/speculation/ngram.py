"""Prompt lookup (vLLM's `ngram` proposer, llama.cpp's lookup decoding): the tokens that followed the latest
earlier occurrence of the sequence's last few tokens, in its prompt or its output so far.

An index per sequence, grown as its tokens grow: every n-gram of `low` tokens -> the positions where one ends
(ascending), so a lookup reads a handful of positions instead of scanning the context each step.
"""
from __future__ import annotations

CANDIDATES = 8          # the latest positions of the shortest n-gram a lookup tries to extend


class NgramIndex:
    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high          # the shortest and the longest suffix a lookup matches
        self._ends: dict[tuple[int, ...], list[int]] = {}     # n-gram of `low` tokens -> positions of its last
        self._indexed = 0                        # n-grams ending before this position are in `_ends`

    def propose(self, tokens: list[int], k: int, tail: list[int] | tuple[int, ...] = ()) -> list[int]:
        """Up to k tokens that followed, in `tokens`, the latest earlier occurrence of the longest suffix of
        `tokens + tail` (between `low` and `high` tokens long); [] if none occurred. `tokens` (the sequence's
        prompt + output) only grows between calls and is indexed; `tail` (tokens proposed ahead of the lookup,
        not yet accepted) is matched, never indexed."""
        context = tokens + list(tail)
        if k <= 0 or len(context) <= self.low:
            return []
        self._grow(tokens)
        best, best_len = -1, 0
        for end in reversed(self._ends.get(tuple(context[-self.low:]), [])[-CANDIDATES:]):
            n = self._match(tokens, end, context)
            if n > best_len:
                best, best_len = end, n
            if n == self.high:
                break
        return tokens[best + 1:best + 1 + k] if best >= 0 else []

    def _grow(self, tokens: list[int]) -> None:
        """Index the n-grams that end before the last token (each has a token after it to propose)."""
        for end in range(max(self._indexed, self.low - 1), len(tokens) - 1):
            self._ends.setdefault(tuple(tokens[end - self.low + 1:end + 1]), []).append(end)
        self._indexed = max(self._indexed, len(tokens) - 1)

    def _match(self, tokens: list[int], end: int, context: list[int]) -> int:
        """How many tokens (at most `high`) the suffix of `tokens` ending at `end` shares with the suffix of
        `context`; the last `low` are known to."""
        n, last = self.low, len(context) - 1
        while n < self.high and end - n >= 0 and tokens[end - n] == context[last - n]:
            n += 1
        return n
