"""Verifying proposals row by row (speculation/verify.py) through the scheduler's update: what greedy keeps,
where a stop condition cuts the proposals, and that sampled verification keeps the row's distribution (a
chi-square test on a fixed-logits toy model that a sampler keeping proposals too often fails)."""
from __future__ import annotations

import torch

from conch.engine.backends.conch.core.sampler import Sampler
from conch.engine.backends.conch.core.scheduler import Scheduler
from conch.engine.backends.conch.core.sequence import Sequence
from conch.engine.backends.conch.speculation import Speculation, verify
from conch.engine.types import GenerationRequest, RequestStatus, SamplingParams
from tests.engine.backends.conch.fake_runner import FakeRunner

V, EOS = 6, 5


class _Tokenizer:
    def decode(self, ids: list[int]) -> str:
        return f"<{ids[0]}>"


def _seq(output: list[int], max_tokens: int = 16, seed: int | None = None, **params) -> Sequence:
    p = SamplingParams(max_tokens=max_tokens, **{"temperature": 0.0, **params})
    seq = Sequence(request=GenerationRequest(id="r", model="m", params=p), index=0, prompt_ids=[1, 2, 3],
                   eos_ids=frozenset({EOS}), max_total=64,
                   generator=torch.Generator().manual_seed(seed) if seed is not None else None)
    seq.output_ids = list(output)
    seq.computed = seq.num_tokens - 1
    return seq


def _script(*tokens: int):
    """A sample() whose row r picks tokens[r] (greedy on logits made for it)."""
    return lambda seqs, rows: [(tokens[r], None) for r in rows]


def test_greedy_keeps_proposals_up_to_the_first_mismatch_and_adds_the_row_after():
    seq = _seq([4])
    assert verify([seq], ((2, 3, 1),), _script(2, 3, 0, 1), Scheduler._record) == [2]
    assert seq.output_ids == [4, 2, 3, 0]


def test_every_proposal_kept_gives_one_token_more():
    seq = _seq([4])
    assert verify([seq], ((2, 3),), _script(2, 3, 1), Scheduler._record) == [2]
    assert seq.output_ids == [4, 2, 3, 1]


def test_no_token_past_a_stop_token_or_max_tokens():
    stopped = _seq([4])
    verify([stopped], ((EOS, 2),), _script(EOS, 2, 2), Scheduler._record)
    assert stopped.output_ids == [4, EOS] and stopped.status == RequestStatus.FINISHED_STOPPED
    capped = _seq([4], max_tokens=3)
    verify([capped], ((2, 3, 1),), _script(2, 3, 1, 0), Scheduler._record)
    assert capped.output_ids == [4, 2, 3] and capped.status == RequestStatus.FINISHED_LENGTH


def test_rows_follow_each_sequence_and_plain_rows_are_sampled_once():
    a, b, c = _seq([4]), _seq([4]), _seq([4])
    # a proposes 2 (rows 0-2), b none (row 3), c one (rows 4-5)
    assert verify([a, b, c], ((1, 2), (), (3,)), _script(1, 0, 0, 2, 3, 4), Scheduler._record) == [1, 0, 1]
    assert (a.output_ids, b.output_ids, c.output_ids) == ([4, 1, 0], [4, 2], [4, 3, 4])


def test_the_scheduler_counts_accepted_kv_and_the_next_step_starts_after_it():
    s = Scheduler(FakeRunner(), max_batch_size=2, step_tokens=64, speculation=Speculation(tokens=3))
    seq = _seq([], max_tokens=16)
    seq.prompt_ids = [1, 2, 3, 1, 2, 3, 1, 2]
    s.add(seq)
    s.update(s.schedule(), _script(3))                       # the prompt, then token 3
    batch = s.schedule()
    assert batch.drafts == ((1, 2, 3),) and batch.spans == ((8, 1),)   # the lookup proposes after (2, 3)
    s.update(batch, _script(1, 2, 0, 9))                     # keeps 1, 2; 0 instead of 3
    assert seq.output_ids == [3, 1, 2, 0] and seq.computed == 11 and (s.proposed_tokens, s.accepted_tokens) == (3, 2)
    assert s.schedule().spans == ((11, 1),)                  # the rejected proposal's column is computed again


def test_no_proposals_when_more_rows_decode_than_max_batch():
    assert Speculation(tokens=3, max_batch=1).drafts([_seq([1, 2, 3, 1, 2]), _seq([1, 2, 3, 1, 2])]) == ((), ())


def test_sampled_verification_keeps_each_rows_distribution():
    """Fixed logits (the same distribution p at every row); the draft always proposes token 1, then 1 again.
    The first token must follow p, and so must the second where the first was kept (only then is its row
    sampled): a sampler that kept proposals more (or less) often than p(1) fails both."""
    torch.manual_seed(0)
    logits = torch.tensor([1.0, 0.2, -0.5, 0.7, 0.0, -9.0])     # EOS all but never drawn
    p = logits.softmax(-1)
    sampler = Sampler(_Tokenizer(), V)
    trials = 6000
    first, second = torch.zeros(V), torch.zeros(V)
    for trial in range(trials):
        seq = _seq([4], temperature=1.0, seed=trial)
        verify([seq], ((1, 1),), lambda seqs, rows: sampler.sample(seqs, logits.expand(len(rows), V)),
               Scheduler._record)
        first[seq.output_ids[1]] += 1
        if len(seq.output_ids) > 2:
            second[seq.output_ids[2]] += 1
    live = p > 1e-3
    assert second.sum() == first[1]
    for counts in (first, second):
        expected = p * counts.sum()
        chi2 = float((((counts - expected) ** 2) / expected)[live].sum())
        assert chi2 < 20.5, (counts, expected)                   # df 4: p = 0.0004
