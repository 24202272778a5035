"""How many prompt tokens a chunked-prefill step may add beside its decode rows.

A step that prefills while streams decode makes every stream wait for it. The budget keeps that wait within
`stall` x a decode-only step (issue 16: inter-token p99 <= 3 x p50 while long prompts arrive), and gives a
step with no decode rows the whole `max_step_tokens`. When more prompts wait for their first token than rows
decode (a burst: 64 agent requests at once), there is no bound: the step serves the many who wait before the
few who stream, as vLLM's scheduler always does, until the streams outnumber them; then the whole burst
decodes in full batches instead of trickling in beside a few streams at small, costly batches.

Costs are learned from the steps themselves: a step's seconds ~ base + per_row x decode rows + per_token x
prompt tokens, fit by least squares over the steps seen, older ones weighing less (each new step keeps
1 - WEIGHT of the old). One linear fit, rather than an average of decode-only steps, because a burst has no
decode-only step while its batch grows: an estimate taken at 16 rows would charge a 30-row step's extra
rows to its prompt tokens, and the bound would shrink the more rows joined.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

WEIGHT = 0.1          # of a new step in the fit


@dataclass
class StallBudget:
    stall: float = 3.0                 # a prefilling step may take this many decode-only steps' time; 0: no bound
    min_tokens: int = 32               # prompt tokens a step computes however slow they are
    _gram: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))   # sum of w x x^T, x = (1, rows, tokens)
    _moment: np.ndarray = field(default_factory=lambda: np.zeros(3))      # sum of w x seconds
    _seen: set[str] = field(default_factory=set)                           # "rows", "tokens": each seen in a step

    def observe(self, decode_rows: int, prompt_tokens: int, seconds: float) -> None:
        """One step's make-up and wall time."""
        x = np.array([1.0, decode_rows, prompt_tokens])
        self._gram = (1 - WEIGHT) * self._gram + WEIGHT * np.outer(x, x)
        self._moment = (1 - WEIGHT) * self._moment + WEIGHT * seconds * x
        self._seen |= {name for name, n in (("rows", decode_rows), ("tokens", prompt_tokens)) if n}

    def costs(self) -> tuple[float, float, float] | None:
        """(base, per_row, per_token) seconds, or None before steps with decode rows and with prompt tokens."""
        if self._seen != {"rows", "tokens"}:
            return None
        base, per_row, per_token = np.linalg.lstsq(self._gram, self._moment, rcond=1e-9)[0]
        return float(base), float(per_row), float(per_token)

    def tokens(self, decode_rows: int, cap: int, waiting: int = 0) -> int:
        """Prompt tokens the next step may compute (at most `cap`), given how many rows it decodes and how
        many sequences wait for their first token (prefilling or queued)."""
        costs = self.costs() if decode_rows and self.stall and waiting <= decode_rows else None
        if costs is None or costs[2] <= 0:
            return cap                     # no bound: stall 0, nothing decoding, a burst, or nothing learned yet
        base, per_row, per_token = costs
        decode = max(base + per_row * decode_rows, 0.0)
        allowed = (self.stall - 1) * decode / per_token
        return max(self.min_tokens, min(cap, int(allowed)))
