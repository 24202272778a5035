"""How many of a choice's output tokens were thinking, counted from the token ids alone (engine.types'
ReasoningControl), for a choice that a stop string ends before the backend's own final usage arrives.

It counts as the engine's reasoning gate does: tokens read while thinking, the end (or the forced end text
written once the budget is spent) included; the start is not counted; a reply that answers at once counts
none. BEFORE -> THINKING once the output ends with `start_ids`; BEFORE -> ANSWER once the output is longer than
the start could still become (two tokens of slack, as the gate allows, or at once where the start is one token
and a grammar reads the answer's first token).
"""
from __future__ import annotations

from conch.engine.types import ReasoningControl

BEFORE, THINKING, ANSWER = 0, 1, 2


class ThinkingCount:
    def __init__(self, control: ReasoningControl, has_grammar: bool) -> None:
        self._c = control
        self._phase = control.phase
        self._tail: list[int] = []      # the last tokens, enough to see a start or an end
        self._single_start = has_grammar and len(control.start_ids) == 1
        self._forced = 0 if control.phase == THINKING and control.budget == 0 else -1
        self.tokens = 0

    def add(self, token_id: int) -> None:
        if self._phase == BEFORE:
            self._before(token_id)
        elif self._phase == THINKING:
            self._thinking(token_id)

    def _before(self, token_id: int) -> None:
        self._tail.append(token_id)
        start = list(self._c.start_ids)
        if start and self._tail[-len(start):] == start:
            self._phase, self._tail = THINKING, []
            self._forced = 0 if self._c.budget == 0 else -1
        elif not start or len(self._tail) >= len(start) + 2 or self._single_start:
            self._phase = ANSWER

    def _thinking(self, token_id: int) -> None:
        self.tokens += 1
        if self._forced >= 0:
            self._forced += 1
            if self._forced == len(self._c.forced_ids):
                self._phase = ANSWER
            return
        end = list(self._c.end_ids)
        self._tail = (self._tail + [token_id])[-max(len(end), 1):]
        if end and self._tail == end:
            self._phase = ANSWER
        elif self._c.budget is not None and self.tokens >= self._c.budget:
            self._forced = 0
