"""The chunked prefill's budget: the whole step when nothing decodes, and while rows decode as many prompt
tokens as keep a step within `stall` decode-only steps, learned from the steps' own times."""
from __future__ import annotations

from engine.backends.transformers.stall_budget import StallBudget


def test_nothing_decoding_or_nothing_learned_yet_gives_the_cap():
    budget = StallBudget()
    assert budget.tokens(0, 1024) == 1024
    assert budget.tokens(16, 1024) == 1024              # no step seen yet
    budget.observe(16, 0, 0.05)
    assert budget.tokens(16, 1024) == 1024              # a decode step seen, no prompt token cost yet
    assert budget.tokens(0, 1024) == 1024


def test_the_budget_keeps_a_prefilling_step_within_stall_decode_steps():
    budget = StallBudget(stall=3.0, min_tokens=32)
    for _ in range(20):
        budget.observe(16, 0, 0.05)                     # decode-only: 50 ms
        budget.observe(16, 100, 0.05 + 100 * 0.001)     # each prompt token adds 1 ms
    assert abs(budget.tokens(16, 1024) - 100) <= 1      # (3 - 1) x 50 ms / 1 ms
    assert budget.tokens(16, 64) == 64                  # never over the cap
    budget.observe(16, 0, 0.001)                        # decode steps got much faster: the floor holds
    for _ in range(30):
        budget.observe(16, 0, 0.001)
    assert budget.tokens(16, 1024) == 32


def test_more_prompts_waiting_than_rows_decoding_lift_the_bound():
    budget = StallBudget(stall=3.0, min_tokens=32)
    for _ in range(20):
        budget.observe(4, 0, 0.05)
        budget.observe(4, 100, 0.05 + 100 * 0.001)
    assert abs(budget.tokens(4, 1024, waiting=3) - 100) <= 1       # fewer wait than decode: the bound
    assert abs(budget.tokens(4, 1024, waiting=4) - 100) <= 1
    assert budget.tokens(4, 1024, waiting=5) == 1024               # a burst: the whole step


def test_a_burst_growing_its_batch_does_not_shrink_the_bound():
    """No decode-only step while a burst's batch grows: its extra rows are not charged to the prompt tokens."""
    def seconds(rows: int, tokens: int) -> float:
        return 0.025 + 0.0015 * rows + 0.0006 * tokens

    budget = StallBudget(stall=3.0)
    for _ in range(20):                                 # a steady state at 16 rows
        budget.observe(16, 0, seconds(16, 0))
        budget.observe(16, 300, seconds(16, 300))
    for rows in range(1, 31):                           # then a burst: every step has prompt tokens
        budget.observe(rows, 120, seconds(rows, 120))
    want = 2 * seconds(30, 0) / 0.0006                  # (3 - 1) x a 30-row decode step / a token's cost
    assert abs(budget.tokens(30, 1024) - want) <= 0.02 * want


def test_a_pure_prefill_step_teaches_the_token_cost():
    budget = StallBudget(stall=2.0)
    budget.observe(0, 500, 0.5)                         # 1 ms a token, nothing decoding
    budget.observe(8, 0, 0.04)
    assert abs(budget.tokens(8, 1024) - 40) <= 1        # (2 - 1) x 40 ms / 1 ms


def test_stall_zero_means_no_bound():
    budget = StallBudget(stall=0)
    for _ in range(5):
        budget.observe(16, 0, 0.05)
        budget.observe(16, 100, 0.15)
    assert budget.tokens(16, 1024) == 1024


def test_the_model_config_checks_prefill_stall():
    import pytest

    from engine.errors import InvalidRequest
    from engine.repository import ModelConfig

    assert ModelConfig.from_mapping("m", {"prefill_stall": 0}).prefill_stall == 0
    assert ModelConfig.from_mapping("m", {"prefill_stall": 4.5}).prefill_stall == 4.5
    for bad in (0.5, -1, "fast", True):
        with pytest.raises(InvalidRequest, match="prefill_stall"):
            ModelConfig.from_mapping("m", {"prefill_stall": bad})
