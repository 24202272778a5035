"""engine/pipeline/thinking.py counts what the engine's reasoning gate counts, over random outputs (starts,
ends, budgets, every phase; while the gate forces its end text, the forced token is what the model writes)."""
from __future__ import annotations

import random

import pytest

from conch.engine.backends.conch.core.reasoning_gate import ReasoningGate
from conch.engine.pipeline.thinking import ThinkingCount
from conch.engine.types import ReasoningControl

START, END, FORCED = (5, 6), (7, 8), (7, 8, 9)


@pytest.mark.parametrize("seed", range(40))
def test_counts_as_the_gate_does(seed):
    rng = random.Random(seed)
    start = START[:rng.choice((1, 2))]
    control = ReasoningControl(start, END, FORCED, phase=rng.choice((0, 1, 2)), budget=rng.choice((None, 0, 1, 3, 8)))
    gate, count = ReasoningGate(control), ThinkingCount(control, has_grammar=False)
    for _ in range(rng.randrange(1, 30)):
        forced = gate.forced_tokens()
        token = forced[0] if forced else rng.choice((1, 2, 5, 6, 7, 8, 9))
        assert gate.accept(token)
        count.add(token)
        assert count.tokens == gate.thinking_tokens


def test_an_answer_at_once_counts_nothing():
    count = ThinkingCount(ReasoningControl(START, END, FORCED), has_grammar=False)
    for token in (1, 2, 3, 5, 6, 1):
        count.add(token)
    assert count.tokens == 0
