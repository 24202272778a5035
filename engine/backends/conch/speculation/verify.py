"""Verifying a step's proposals: row by row, each decoding sequence samples as if it decoded one token a step.

A sequence that proposed k tokens has k + 1 logits rows this step: at its last token and at each proposed
one. Depth d samples row d of every sequence still verifying, exactly as a one-token step would (penalties
over the tokens accepted so far, the grammar mask after the matcher took them, the sequence's own generator),
and records the token (its stop conditions included). A sequence goes on to depth d + 1 only while the token
equals its proposal d and it has not finished: rows past the first mismatch were computed from a wrong token
and are dropped, as is their KV (the store's columns past `computed` are overwritten by later steps).

So greedy output is token for token that of one-token steps, and a sampled token has the distribution of the
row's processed p: drawing y ~ p and keeping the proposal x iff y == x is the rejection rule for a draft that
is x with certainty (keep x with probability p(x); else y, drawn from p without x, renormalized). A seeded
stream draws once per emitted token, in the same order: the same tokens as one-token steps, given the same
logits.
"""
from __future__ import annotations

from typing import Callable

from conch.engine.backends.conch.core.sequence import Sequence
from conch.engine.types import PositionLogprobs

Sampled = tuple[int, PositionLogprobs | None]
Sample = Callable[[list[Sequence], list[int]], list[Sampled | None]]   # (seqs, their logits rows) -> a token each


def verify(sampling: list[Sequence], drafts: tuple[tuple[int, ...], ...], sample: Sample,
           record: Callable[[Sequence, Sampled | None], bool]) -> list[int]:
    """Per sampling sequence, how many of its proposals it accepted. `drafts[i]` belongs to `sampling[i]`
    (missing at the end: none); sampling[i]'s rows are first[i] .. first[i] + len(drafts[i]). `record` takes
    a sampled token into its sequence, False if the sequence failed or has finished."""
    proposals = [drafts[i] if i < len(drafts) else () for i in range(len(sampling))]
    first = [0]
    for p in proposals[:-1]:
        first.append(first[-1] + 1 + len(p))
    accepted = [0] * len(sampling)
    active = list(range(len(sampling)))
    depth = 0
    while active:
        tokens = sample([sampling[i] for i in active], [first[i] + depth for i in active])
        going = []
        for i, row in zip(active, tokens, strict=True):
            if record(sampling[i], row) and depth < len(proposals[i]) and row is not None \
                    and row[0] == proposals[i][depth]:
                accepted[i] += 1
                going.append(i)
        active, depth = going, depth + 1
    return accepted
