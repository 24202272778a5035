"""The sampler alone, on hand-made logits: greedy, bias, min_tokens, seeded draws, logprobs, and a bad row
failing alone."""
from __future__ import annotations

import torch

from conch.engine.backends.conch.core.sampler import Sampler
from conch.engine.backends.conch.core.sequence import Sequence
from conch.engine.types import GenerationRequest, RequestStatus, SamplingParams

V = 8
EOS = 7


class _Tokenizer:
    def decode(self, ids: list[int]) -> str:
        return f"<{ids[0]}>"


def _seq(seed: int | None = None, output: list[int] | None = None, **params) -> Sequence:
    p = SamplingParams(**{"temperature": 0.0, **params})
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    seq = Sequence(request=GenerationRequest(id="r", model="m", params=p), index=0, prompt_ids=[1, 2],
                   eos_ids=frozenset({EOS}), max_total=64, generator=gen)
    seq.output_ids = list(output or [])
    return seq


def _logits(*rows: list[float]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)


ROW = [0.0, 1.0, 3.0, 2.0, 0.5, 0.0, 0.0, 5.0]       # EOS (7) most likely, then 2, then 3


def test_greedy_takes_the_argmax_per_row():
    out = Sampler(_Tokenizer(), V).sample([_seq(), _seq()], _logits(ROW, list(reversed(ROW))))
    assert [t for t, _ in out] == [7, 0]


def test_logit_bias_and_min_tokens_move_the_greedy_choice():
    sampler = Sampler(_Tokenizer(), V)
    biased = _seq(logit_bias=((3, 10.0),))
    early = _seq(min_tokens=2)                        # EOS masked before two tokens
    late = _seq(min_tokens=2, output=[4, 4])
    out = sampler.sample([biased, early, late], _logits(ROW, ROW, ROW))
    assert [t for t, _ in out] == [3, 2, 7]


def test_frequency_penalty_lowers_repeated_tokens():
    seq = _seq(frequency_penalty=2.0, output=[7, 7])   # 5.0 - 2 * 2 = 1.0 < 3.0
    assert Sampler(_Tokenizer(), V).sample([seq], _logits(ROW))[0][0] == 2


def test_a_seeded_draw_repeats_and_top_k_bounds_it():
    def draws(seed: int) -> list[int]:
        seq = _seq(seed=seed, temperature=1.0, top_k=2)
        return [Sampler(_Tokenizer(), V).sample([seq], _logits(ROW))[0][0] for _ in range(30)]

    first = draws(3)
    assert first == draws(3)
    assert set(first) <= {7, 2} and len(set(first)) == 2


def test_logprobs_are_the_raw_distributions_and_top_k_is_sorted():
    seq = _seq(logprobs=2)
    token, lp = Sampler(_Tokenizer(), V).sample([seq], _logits(ROW))[0]
    expected = torch.log_softmax(_logits(ROW)[0], -1)
    assert token == 7 and abs(lp.chosen.logprob - float(expected[7])) < 1e-6
    assert [t.token_id for t in lp.top] == [7, 2] and lp.chosen.token == "<7>"


def test_a_row_whose_values_break_sampling_fails_alone():
    good, bad = _seq(seed=1, temperature=1.0), _seq(seed=2, temperature=1.0)
    broken = list(ROW)
    broken[0] = float("nan")
    out = Sampler(_Tokenizer(), V).sample([good, bad], _logits(ROW, broken))
    assert out[0] is not None and out[1] is None
    assert bad.status == RequestStatus.FINISHED_ERROR and "sampling failed" in bad.error
    assert good.status == RequestStatus.WAITING


# A row of known probabilities (temperature 1): 0.4, 0.3, 0.15, 0.1, then a tail of 0.05.
PROBS = [0.4, 0.3, 0.15, 0.1, 0.03, 0.01, 0.005, 0.005]
LOG_ROW = [float(torch.tensor(p).log()) for p in PROBS]


def _filtered(**params) -> torch.Tensor:
    """The probabilities the sampler draws from for one row of PROBS (after its filters)."""
    seq = _seq(seed=0, **{"temperature": 1.0, **params})
    _, probs = Sampler(_Tokenizer(), V)._distributions([seq], _logits(LOG_ROW))
    assert probs is not None
    return probs[0]


def test_top_p_keeps_the_smallest_head_whose_mass_reaches_p_renormalised():
    kept = _filtered(top_p=0.8)                      # 0.4 + 0.3 = 0.7 < 0.8: the third token completes it
    assert kept.nonzero().flatten().tolist() == [0, 1, 2]
    torch.testing.assert_close(kept[:3], torch.tensor(PROBS[:3]) / sum(PROBS[:3]))
    assert _filtered(top_p=0.3).nonzero().flatten().tolist() == [0]


def test_min_p_drops_tokens_below_its_fraction_of_the_top_probability():
    kept = _filtered(min_p=0.3)                      # threshold 0.3 x 0.4 = 0.12
    assert kept.nonzero().flatten().tolist() == [0, 1, 2]
    torch.testing.assert_close(kept[:3], torch.tensor(PROBS[:3]))
    assert _filtered(min_p=0.05).nonzero().flatten().tolist() == [0, 1, 2, 3, 4]     # threshold 0.02


def test_seeded_draws_under_top_p_land_only_on_the_kept_tokens():
    seq = _seq(seed=11, temperature=1.0, top_p=0.8)
    sampler = Sampler(_Tokenizer(), V)
    draws = [sampler.sample([seq], _logits(LOG_ROW))[0][0] for _ in range(300)]
    assert set(draws) == {0, 1, 2}
    assert draws.count(0) > draws.count(2)           # 0.47 against 0.18 of the kept mass


def _adjusted(seq: Sequence, row: list[float]) -> list[float]:
    adjusted, _ = Sampler(_Tokenizer(), V)._distributions([seq], _logits(row))
    return adjusted[0].tolist()


def test_presence_penalty_subtracts_once_per_seen_token_and_frequency_per_occurrence():
    row = [1.0] * V
    assert _adjusted(_seq(presence_penalty=0.5, output=[3, 3, 5]), row) == [1, 1, 1, 0.5, 1, 0.5, 1, 1]
    both = _adjusted(_seq(presence_penalty=0.5, frequency_penalty=0.25, output=[3, 3, 5]), row)
    assert both == [1, 1, 1, 0.0, 1, 0.25, 1, 1]     # 3: 1 - 0.5 - 2 x 0.25; 5: 1 - 0.5 - 0.25


def test_repetition_penalty_divides_positive_and_multiplies_negative_logits_of_seen_tokens():
    row = [0.0, 1.0, -1.0, 2.0, -0.5, 3.0, 0.0, 0.0]
    seq = _seq(repetition_penalty=2.0, output=[4])   # seen: the prompt's 1 and 2, the output's 4
    assert _adjusted(seq, row) == [0.0, 0.5, -2.0, 2.0, -1.0, 3.0, 0.0, 0.0]
