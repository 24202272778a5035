"""How many prompt tokens a chunked-prefill step may add beside its decode rows.

A step that prefills while streams decode makes every stream wait for it. The budget keeps that wait within
`stall` x a decode-only step (issue 16: inter-token p99 <= 3 x p50 while long prompts arrive), and gives a
step with no decode rows the whole `max_step_tokens`. Costs are learned from the steps themselves, as
exponential averages: the seconds of a decode-only step, and the seconds one prompt token adds to a step.
"""
from __future__ import annotations

from dataclasses import dataclass

WEIGHT = 0.2          # of a new observation in the averages


def _average(old: float | None, new: float) -> float:
    return new if old is None else (1 - WEIGHT) * old + WEIGHT * new


@dataclass
class StallBudget:
    stall: float = 3.0                 # a prefilling step may take this many decode-only steps' time; 0: no bound
    min_tokens: int = 32               # prompt tokens a step computes however slow they are
    decode_seconds: float | None = None
    token_seconds: float | None = None

    def observe(self, decode_rows: int, prompt_tokens: int, seconds: float) -> None:
        """One step's make-up and wall time."""
        if decode_rows and not prompt_tokens:
            self.decode_seconds = _average(self.decode_seconds, seconds)
        elif prompt_tokens and (not decode_rows or self.decode_seconds is not None):
            extra = seconds - (self.decode_seconds or 0.0) if decode_rows else seconds
            self.token_seconds = _average(self.token_seconds, max(extra, 0.0) / prompt_tokens)

    def tokens(self, decode_rows: int, cap: int) -> int:
        """Prompt tokens the next step may compute (at most `cap`), given how many rows it decodes."""
        if not decode_rows or not self.stall or self.decode_seconds is None or not self.token_seconds:
            return cap                     # stall 0: no bound
        allowed = (self.stall - 1) * self.decode_seconds / self.token_seconds
        return max(self.min_tokens, min(cap, int(allowed)))
