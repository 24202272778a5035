"""How many prompt tokens a chunked-prefill step may add beside its decode rows.

A step that prefills while streams decode makes every stream wait for it. The budget keeps that wait within
`stall` x a decode-only step (issue 16: inter-token p99 <= 3 x p50 while long prompts arrive; the default
2 aims the mean prefilling step at twice a decode step, leaving room under 3 for the noise of a shared CPU:
tokenizing an arriving prompt takes a core from the step), and gives a step with no decode rows the whole
`max_step_tokens`. When more prompts wait for their first token than rows
decode (a burst: 64 agent requests at once), there is no bound: the step serves the many who wait before the
few who stream, as vLLM's scheduler always does, until the streams outnumber them; then the whole burst
decodes in full batches instead of trickling in beside a few streams at small, costly batches.

Costs are learned from the steps themselves: a step's seconds ~ base + per_row x decode rows + per_token x
prompt tokens + per_column x the columns those tokens attend to (a chunk of n tokens from position s:
n (s + n / 2), in thousands), fit by least squares over the steps seen, older ones weighing less (each new
step keeps 1 - WEIGHT of the old). The column term is why a long prompt's late chunks get fewer tokens than
its first: each of their tokens attends to more. A linear fit over both decode rows and prompt tokens,
rather than an average of decode-only steps, because a burst has no decode-only step while its batch grows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

WEIGHT = 0.1          # of a new step in the fit
COLUMNS = 1024.0      # the column feature's unit


def _columns(start: int, n: int) -> float:
    return n * (start + n / 2) / COLUMNS


@dataclass
class Allotment:
    """One step's prompt tokens, chunk by chunk: `take` grants a chunk what fits in the seconds left."""
    seconds: float                     # what the step's prompt tokens may still add; inf: no bound
    per_token: float = 0.0
    per_column: float = 0.0
    floor: int = 0                     # tokens the step computes whatever they cost
    taken: int = 0

    @property
    def open(self) -> bool:
        return self.seconds > 1e-9 or self.taken < self.floor      # 1e-9: rounding left by take

    def take(self, start: int, want: int) -> int:
        """Tokens of a chunk from position `start` (at most `want`; at least 1 while `open`)."""
        if want <= 0 or not self.open:
            return 0
        n = want if math.isinf(self.seconds) else min(want, max(1, self._fits(start)))
        n = max(n, min(want, self.floor - self.taken))
        self.seconds -= self.per_token * n + self.per_column * _columns(start, n)
        self.taken += n
        return n

    def _fits(self, start: int) -> int:
        """The most tokens from `start` whose cost a n^2 + b n stays within the seconds left."""
        if self.seconds <= 1e-9:
            return 0
        a = self.per_column / (2 * COLUMNS)
        b = self.per_token + self.per_column * start / COLUMNS
        if a <= 0:
            return int(self.seconds / b) if b > 0 else 1 << 30
        return int((-b + math.sqrt(b * b + 4 * a * self.seconds)) / (2 * a))


@dataclass
class StallBudget:
    stall: float = 2.0                 # a prefilling step may take this many decode-only steps' time; 0: no bound
    min_tokens: int = 32               # prompt tokens a step computes however slow they are
    _gram: np.ndarray = field(default_factory=lambda: np.zeros((4, 4)))   # sum of w x x^T
    _moment: np.ndarray = field(default_factory=lambda: np.zeros(4))      # sum of w x seconds
    _seen: set[str] = field(default_factory=set)                           # "rows", "tokens": each seen in a step

    def observe(self, decode_rows: int, chunks: list[tuple[int, int]], seconds: float) -> None:
        """One step's make-up (its decode rows, its prompt chunks as (start, n)) and wall time. A one-token
        chunk (a prompt whose KV a slot kept but its last token) costs what a decode row does, and counts as
        one: 16 of them alone in a step would otherwise be the only prompt-token cost learned before a long
        prompt arrives, and a per-token cost fit to them let its first chunks stall the streams."""
        decode_rows += sum(n == 1 for _, n in chunks)
        chunks = [(s, n) for s, n in chunks if n > 1]
        tokens = sum(n for _, n in chunks)
        x = np.array([1.0, decode_rows, tokens, sum(_columns(s, n) for s, n in chunks)])
        self._gram = (1 - WEIGHT) * self._gram + WEIGHT * np.outer(x, x)
        self._moment = (1 - WEIGHT) * self._moment + WEIGHT * seconds * x
        self._seen |= {name for name, n in (("rows", decode_rows), ("tokens", tokens)) if n}

    def costs(self) -> tuple[float, float, float, float] | None:
        """(base, per_row, per_token, per_column) seconds, or None before steps with decode rows and with
        prompt tokens."""
        if self._seen != {"rows", "tokens"}:
            return None
        kept = [0, 1, 2, 3]
        while True:                        # the token and column costs may not be negative: refit without them
            fit = np.linalg.lstsq(self._gram[np.ix_(kept, kept)], self._moment[kept], rcond=1e-9)[0]
            coef = dict(zip(kept, fit, strict=True))
            negative = [i for i in (2, 3) if coef.get(i, 0.0) < 0]
            if not negative:
                return tuple(float(coef.get(i, 0.0)) for i in range(4))   # type: ignore[return-value]
            kept.remove(negative[0])

    def allot(self, decode_rows: int, waiting: int = 0) -> Allotment:
        """The next step's prompt allotment, given how many rows it decodes and how many sequences wait for
        their first token (prefilling or queued; none: no prompt to bound)."""
        costs = self.costs() if decode_rows and self.stall and 0 < waiting <= decode_rows else None
        if costs is None or costs[2] + costs[3] <= 0:      # (no cost learned for prompt tokens yet)
            return Allotment(math.inf)     # no bound: stall 0, nothing decoding, nothing waiting (most steps:
                                           # no fit, whose LAPACK call hands the GIL to the event loop), a
                                           # burst, or nothing learned yet
        base, per_row, per_token, per_column = costs
        decode = max(base + per_row * decode_rows, 0.0)
        return Allotment((self.stall - 1) * decode, per_token, per_column, self.min_tokens)
