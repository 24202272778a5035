"""A reasoning request's matcher: no constraint while the model thinks, its thinking budget enforced, and the
request's grammar (if any) from the first answer token on.

It stands where a grammars.Matcher stands in a Sequence (fill_bitmask, accept, is_finished, forced_tokens),
so the sampler and scheduler need no branch for reasoning. Phases follow engine.types.ReasoningControl:
BEFORE -> THINKING when the output starts with start_ids (a single-token start is offered beside the grammar's
first tokens), BEFORE -> ANSWER on anything else; THINKING -> ANSWER when the output ends with end_ids, or
once the budget is spent and the forced end has been written token by token.
"""
from __future__ import annotations

from typing import Any

import torch

from conch.engine.types import ReasoningControl
from conch.grammars.bitmask import set_tokens

BEFORE, THINKING, ANSWER = 0, 1, 2


class ReasoningGate:
    def __init__(self, control: ReasoningControl, inner: Any = None) -> None:
        self._c = control
        self._inner = inner            # grammars.Matcher of the answer, or None
        self._phase = control.phase
        self._out: list[int] = []      # output tokens read while not answering
        self.thinking_tokens = 0       # tokens read in THINKING (the end included)
        self._forced = -1              # index into forced_ids being written; -1: not forcing
        if self._phase == THINKING and control.budget == 0:
            self._forced = 0

    @property
    def _budget_spent(self) -> bool:
        budget = self._c.budget
        return budget is not None and self.thinking_tokens >= budget

    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the tokens allowed next into bitmask[row] (which arrives allowing every token)."""
        if self._forced >= 0:
            bitmask[row].zero_()
            set_tokens(bitmask, row, [self._c.forced_ids[self._forced]], allowed=True)
        elif self._phase == ANSWER and self._inner is not None:
            self._inner.fill_bitmask(bitmask, row)
        elif self._phase == BEFORE:
            single = len(self._c.start_ids) == 1 and not self._out
            if self._inner is not None and single and self._c.budget != 0:
                self._inner.fill_bitmask(bitmask, row)
                set_tokens(bitmask, row, self._c.start_ids, allowed=True)
            elif self._inner is not None and not self._c.start_ids:
                self._inner.fill_bitmask(bitmask, row)
            elif single and self._c.budget == 0:
                set_tokens(bitmask, row, self._c.start_ids, allowed=False)

    def accept(self, token_id: int) -> bool:
        if self._phase == ANSWER:
            return self._inner.accept(token_id) if self._inner is not None else True
        if self._phase == BEFORE:
            return self._before(token_id)
        return self._thinking(token_id)

    def _before(self, token_id: int) -> bool:
        self._out.append(token_id)
        start = list(self._c.start_ids)
        if start and self._out[-len(start):] == start:
            self._phase, self._out = THINKING, []
            self._forced = 0 if self._c.budget == 0 else -1
            return True
        if start and len(self._out) < len(start) + 2 and not (self._inner is not None and len(start) == 1):
            return True                # a multi-token start may still be coming
        self._phase = ANSWER           # the model answered at once: the grammar (if any) reads this token
        return self._inner.accept(token_id) if self._inner is not None else True

    def _thinking(self, token_id: int) -> bool:
        if self._forced >= 0 and token_id != self._c.forced_ids[self._forced]:
            return False
        self._out.append(token_id)
        self.thinking_tokens += 1
        if self._forced >= 0:
            self._forced += 1
            if self._forced == len(self._c.forced_ids):
                self._phase, self._forced = ANSWER, -1
            return True
        end = list(self._c.end_ids)
        del self._out[:-max(len(end), 1)]     # only the tail that may still end with end_ids is kept
        if end and self._out[-len(end):] == end:
            self._phase = ANSWER
        elif self._budget_spent:
            self._forced = 0
        return True

    def is_finished(self) -> bool:
        return self._phase == ANSWER and self._inner is not None and self._inner.is_finished()

    def can_finish(self) -> bool:
        return self._phase != ANSWER or self._inner is None or self._inner.can_finish()

    def forced_tokens(self) -> list[int]:
        if self._forced >= 0:
            return list(self._c.forced_ids[self._forced:])
        if self._phase == ANSWER and self._inner is not None:
            return self._inner.forced_tokens()
        return []
