"""Driving a matcher the way a sampler does, with random tokens chosen among the allowed ones.

Token choice reads the bitmask through numpy (single-threaded): on a busy two-core machine,
torch's intra-op threads make a per-step unpack of 49k bits a hundred times slower.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from conch.grammars import CompiledGrammar, TokenizerInfo, allocate_bitmask

_CLOSING = (b'"', b"}", b"]", b"@")
CLOSE_BIAS = 0.5  # chance per step of drawing among "closing" tokens, so unbounded outputs end too


@dataclass(frozen=True)
class Walk:
    tokens: tuple[int, ...]
    finished: bool
    text: str  # the bytes of every non-EOS token, decoded as strict UTF-8


@lru_cache(maxsize=4)
def closer_ids(info: TokenizerInfo) -> np.ndarray:
    """Bool (V,): EOS and every token with a byte that ends a value (quote, bracket, an email's @)."""
    flags = np.array([any(c in raw for c in _CLOSING) for raw in info.token_bytes], dtype=bool)
    flags[list(info.eos_token_ids)] = True
    return flags


def allowed_ids(row: np.ndarray, vocab_size: int) -> np.ndarray:
    """Bool (V,) from one int32 bitmask row (W,): bit t of the row, little-endian within each int."""
    return np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab_size].astype(bool)


def random_walk(grammar: CompiledGrammar, info: TokenizerInfo, seed: int, max_steps: int) -> Walk:
    """Sample up to `max_steps` tokens uniformly among those allowed (biased to closers), accepting each."""
    rng, matcher = random.Random(seed), grammar.matcher()
    bitmask, closers = allocate_bitmask(1, info.vocab_size), closer_ids(info)
    for _ in range(max_steps):
        if matcher.is_finished():
            break
        matcher.fill_bitmask(bitmask, 0)
        allowed = allowed_ids(bitmask[0].numpy(), info.vocab_size)
        if rng.random() < CLOSE_BIAS and (allowed & closers).any():
            allowed &= closers
        choices = np.flatnonzero(allowed)
        assert len(choices) > 0, "a matcher that is not finished must allow some token"
        token = int(choices[rng.randrange(len(choices))])
        assert matcher.accept(token), f"token {token} was in the mask but refused"
    eos = set(info.eos_token_ids)
    raw = b"".join(info.token_bytes[t] for t in matcher.tokens if t not in eos)
    return Walk(matcher.tokens, matcher.is_finished(), raw.decode("utf-8"))
