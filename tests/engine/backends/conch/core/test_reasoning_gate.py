"""The ReasoningGate: the phases it walks, the budget it forces closed, and the grammar it holds back until
the answer (a stand-in matcher records what the grammar was asked; the sampler's masks are real bitmasks)."""
from __future__ import annotations

from conch.engine.backends.conch.core.reasoning_gate import ANSWER, BEFORE, THINKING, ReasoningGate
from conch.engine.types import ReasoningControl
from conch.grammars import allocate_bitmask
from conch.grammars.bitmask import allowed_tokens

VOCAB = 64
START, END, NL = 10, 11, 12
CONTROL = ReasoningControl(start_ids=(START,), end_ids=(END,), forced_ids=(END, NL))


class Grammar:
    """Allows only token 40 then 41, then is finished."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def fill_bitmask(self, bitmask, row) -> None:
        bitmask[row].zero_()
        bitmask[row, 1] = 1 << (40 + len(self.seen) - 32)

    def accept(self, token_id: int) -> bool:
        if token_id != 40 + len(self.seen):
            return False
        self.seen.append(token_id)
        return True

    def is_finished(self) -> bool:
        return len(self.seen) == 2

    def can_finish(self) -> bool:
        return self.is_finished()

    def forced_tokens(self) -> list[int]:
        return []


def allowed(gate: ReasoningGate) -> list[int]:
    mask = allocate_bitmask(1, VOCAB)
    gate.fill_bitmask(mask, 0)
    return allowed_tokens(mask, 0).tolist()


def test_budget_forces_the_end_then_the_grammar_starts():
    grammar = Grammar()
    gate = ReasoningGate(ReasoningControl((START,), (END,), (END, NL), BEFORE, budget=3), grammar)
    assert allowed(gate) == [START, 40]                  # the grammar's first token, or open the thinking
    assert gate.accept(START)
    for token in (1, 2, 3):                               # anything while thinking: no mask at all
        assert len(allowed(gate)) == VOCAB
        assert gate.accept(token)
    assert allowed(gate) == [END] and gate.forced_tokens() == [END, NL]
    assert not gate.accept(5)                             # past the budget only the forced end goes
    assert gate.accept(END) and allowed(gate) == [NL] and gate.accept(NL)
    assert grammar.seen == [] and allowed(gate) == [40]   # the answer: the grammar from its first token
    assert gate.accept(40) and gate.accept(41) and gate.is_finished()
    assert gate.thinking_tokens == 5                      # three thought, two forced


def test_the_model_closes_its_thinking_itself():
    gate = ReasoningGate(ReasoningControl((START,), (END,), (END, NL), THINKING, budget=100), Grammar())
    for token in (1, END):
        assert gate.accept(token)
    assert gate._phase == ANSWER and allowed(gate) == [40] and gate.thinking_tokens == 2


def test_an_answer_at_once_goes_to_the_grammar():
    grammar = Grammar()
    gate = ReasoningGate(CONTROL, grammar)
    assert gate.accept(40) and grammar.seen == [40] and gate.thinking_tokens == 0


def test_thinking_off():
    gate = ReasoningGate(ReasoningControl((START,), (END,), (END, NL), BEFORE, budget=0))
    assert START not in allowed(gate)                     # nothing may open a block
    closed = ReasoningGate(ReasoningControl((START,), (END,), (END, NL), THINKING, budget=0))
    assert allowed(closed) == [END]                       # a template that always thinks: closed at once
