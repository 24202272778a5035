"""Prompts that arrive together and share a head (a chat template's system prompt, an agent's instructions and
tools): the head's KV computed once, in one sequence's slot, and copied into the others'.

The prefix cache (prefix_cache.py) reuses long heads computed in earlier steps; prompts admitted in the same
step would each compute the head they share. So a newcomer whose prompt shares at least MIN_SHARED tokens with
a sequence still prefilling them waits (`awaited`, unless a kept slot or the prefix cache already gives it as
much: FlatRunner.waits; the scheduler keeps it waiting, oldest first as before) until that sequence has computed
them; its first chunk then copies them from that sequence's slot (`source`,
FlatRunner.first_chunk) instead of computing them. A token's KV depends on the tokens before it only, so the copy
holds what computing them would (the same bits on the batch-invariant kernel paths, as the prefix cache's
copies). The sequence the head comes from always advances (prompts are chunked oldest first), so a newcomer
waits a step or a few at the most: what it pays, in its first token's time, for not computing the head.

Sequences are matched on their `key_ids` (prompt ids, image placeholders keyed by their image)."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MIN_SHARED = 16        # tokens of a shared head worth a wait or a copy (vLLM's prefix cache block)


def shared(a: list[int], b: list[int], limit: int) -> int:
    """The length of the head `a` and `b` share, at most `limit` (slices compared in halves: C compares)."""
    lo, hi = 0, min(len(a), len(b), limit)
    if a[:MIN_SHARED] != b[:MIN_SHARED]:                    # most pairs part at once
        return min(next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), hi), hi)
    while lo < hi:                                   # a[:lo] == b[:lo]; the length shared is at most hi
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def awaited(seq: Any, prefilling: Iterable[Any]) -> int:
    """The longest head (at least MIN_SHARED tokens, not counting `seq`'s last prompt token, which it always
    computes) that `seq` (waiting) shares with a sequence of `prefilling` that has yet to compute it; 0: none.
    The caller waits for it where nothing it holds already (a kept slot, the prefix cache) gives as much."""
    ids, best = seq.key_ids, 0
    for other in prefilling:
        n = shared(ids, other.key_ids, len(ids) - 1)
        if n >= MIN_SHARED and other.computed < n:
            best = max(best, n)
    return best


def source(seq: Any, holders: Iterable[tuple[int, Any]]) -> tuple[int, int] | None:
    """(slot, n): the slot among `holders` ((slot, its occupant)) whose computed KV covers the longest head of
    `seq`'s prompt, n tokens (at least MIN_SHARED, more than `seq` holds, all but its last prompt token at the
    most); None when none does."""
    ids, best = seq.key_ids, None
    for slot, other in holders:
        if other is seq:
            continue
        n = shared(ids, other.key_ids, min(other.computed, len(ids) - 1))
        if n >= max(MIN_SHARED, seq.computed + 1) and (best is None or n > best[1]):
            best = (slot, n)
    return best
