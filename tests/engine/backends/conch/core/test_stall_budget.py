"""The chunked prefill's budget: the whole step when nothing decodes (or more prompts wait than rows decode),
and while rows decode as many prompt tokens as keep a step within `stall` decode-only steps, learned from
the steps' own times; a long prompt's late chunks, attending to more columns, get fewer tokens."""
from __future__ import annotations

import math

from conch.engine.backends.conch.core.stall_budget import Allotment, StallBudget, _columns


def _seconds(rows: int, chunks: list[tuple[int, int]]) -> float:
    """A CPU's made-up step time: 25 ms + 1.5 ms a decode row + 0.5 ms a prompt token + 0.2 ms a thousand
    columns attended."""
    return 0.025 + 0.0015 * rows + sum(0.0005 * n + 0.0002 * _columns(s, n) for s, n in chunks)


def _learned(stall: float = 3.0) -> StallBudget:
    budget = StallBudget(stall=stall, min_tokens=32)
    for i in range(40):
        rows = 8 + i % 17
        chunks = [(300 * (i % 6), 50 + 40 * (i % 7))] if i % 3 else []
        budget.observe(rows, chunks, _seconds(rows, chunks))
    return budget


def test_nothing_decoding_or_nothing_learned_yet_gives_the_cap():
    budget = StallBudget()
    assert budget.allot(16, waiting=1).take(0, 1024) == 1024   # no step seen yet
    budget.observe(16, [], 0.05)
    assert budget.allot(16, waiting=1).take(0, 1024) == 1024   # a decode step seen, no prompt token cost yet
    assert _learned().allot(0).take(0, 1024) == 1024    # nothing decoding


def test_the_bound_keeps_a_prefilling_step_within_stall_decode_steps():
    budget = _learned(stall=3.0)
    limit = 2 * _seconds(16, [])                        # (3 - 1) x a decode-only step of 16 rows
    early, late = budget.allot(16, waiting=1).take(0, 4096), budget.allot(16, waiting=1).take(1500, 4096)
    for start, n in ((0, early), (1500, late)):
        assert abs((_seconds(16, [(start, n)]) - _seconds(16, [])) - limit) <= 0.02 * limit
    assert late < early                                 # each late token attends to 1.5k more columns
    assert budget.allot(16, waiting=1).take(0, 64) == 64           # never over what the chunk wants


def test_an_allotment_shares_its_seconds_between_chunks_and_keeps_its_floor():
    allot = Allotment(seconds=0.1, per_token=0.001, floor=32)
    assert allot.take(0, 60) == 60 and allot.take(0, 100) == 40 and not allot.open
    assert allot.take(0, 10) == 0
    starved = Allotment(seconds=0.001, per_token=0.001, floor=32)
    assert starved.take(0, 100) == 32                   # however slow, a step moves its prompts on
    assert math.isinf(Allotment(math.inf).seconds) and Allotment(math.inf).take(900, 777) == 777


def test_decode_steps_getting_much_faster_leave_the_floor():
    budget = _learned()
    for _ in range(60):
        budget.observe(16, [], 0.001)
        budget.observe(16, [(0, 100)], 0.001 + 100 * 0.0005 + 0.0002 * _columns(0, 100))
    assert budget.allot(16, waiting=1).take(0, 1024) == 32


def test_nothing_waiting_has_nothing_to_bound():
    """A step with no prompt waiting allots no prompt tokens: no fit is made (most decode steps)."""
    assert math.isinf(_learned().allot(16).seconds) and not math.isinf(_learned().allot(16, waiting=1).seconds)


def test_more_prompts_waiting_than_rows_decoding_lift_the_bound():
    budget = _learned()
    bounded = budget.allot(4, waiting=4).take(0, 1024)
    assert bounded < 1024 and budget.allot(4, waiting=3).take(0, 1024) == bounded
    assert budget.allot(4, waiting=5).take(0, 1024) == 1024      # a burst: the whole step


def test_a_burst_growing_its_batch_does_not_shrink_the_bound():
    """No decode-only step while a burst's batch grows: its extra rows are not charged to the prompt tokens."""
    budget = _learned()
    for rows in range(1, 31):                           # every step has prompt tokens
        budget.observe(rows, [(960, 120)], _seconds(rows, [(960, 120)]))
    n = budget.allot(30, waiting=1).take(960, 4096)
    limit = 2 * _seconds(30, [])
    assert abs((_seconds(30, [(960, n)]) - _seconds(30, [])) - limit) <= 0.03 * limit


def test_learned_costs_are_never_negative():
    """Big chunks cheaper per token than small ones would fit a negative column cost, which read as 'prompt
    tokens are free' lifts the bound; the fit drops that term instead."""
    budget = StallBudget(stall=3.0)
    for _ in range(10):
        budget.observe(16, [], 0.04)
        budget.observe(16, [(0, 100)], 0.04 + 0.1)
        budget.observe(16, [(0, 1000)], 0.04 + 0.8)
    costs = budget.costs()
    assert costs is not None and costs[2] >= 0 and costs[3] >= 0
    assert budget.allot(16, waiting=1).take(0, 4096) < 200


def test_stall_zero_means_no_bound():
    assert _learned(stall=0).allot(16, waiting=1).take(0, 1024) == 1024


def test_the_model_config_checks_prefill_stall():
    import pytest

    from conch.engine.errors import InvalidRequest
    from conch.engine.repository import ModelConfig

    assert ModelConfig.from_mapping("m", {"prefill_stall": 0}).prefill_stall == 0
    assert ModelConfig.from_mapping("m", {"prefill_stall": 4.5}).prefill_stall == 4.5
    for bad in (0.5, -1, "fast", True):
        with pytest.raises(InvalidRequest, match="prefill_stall"):
            ModelConfig.from_mapping("m", {"prefill_stall": bad})


def test_one_token_chunks_count_as_decode_rows():
    """Prompts whose slot kept all but their last token: a step of them is a decode step, not prompt tokens."""
    budget = StallBudget(stall=3.0, min_tokens=32)
    budget.observe(0, [(40, 1)] * 16, _seconds(16, []))
    for _ in range(5):
        budget.observe(16, [], _seconds(16, []))
    assert budget.costs() is None                       # no prompt-token cost learned yet: not from those
    assert budget.allot(16, waiting=1).take(0, 1024) == 1024
