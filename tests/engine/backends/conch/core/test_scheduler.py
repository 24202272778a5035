"""The continuous-batching scheduler alone, over plain Sequences (no model): who joins, who decodes, how
chunked prefill shares a step's token budget, and what an abort or a deadline does."""
from __future__ import annotations

import time

from conch.engine.backends.conch.core.scheduler import Scheduler
from conch.engine.backends.conch.core.sequence import Sequence
from conch.engine.types import GenerationRequest, RequestStatus, SamplingParams
from tests.engine.backends.conch.fake_runner import FakeRunner


def _seq(rid: str, prompt: int, max_tokens: int = 4, deadline: float | None = None) -> Sequence:
    req = GenerationRequest(id=rid, model="m", prompt_token_ids=tuple(range(prompt)), deadline=deadline,
                            params=SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True))
    return Sequence(request=req, index=0, prompt_ids=list(range(prompt)), eos_ids=frozenset(), max_total=4096)


def _step(s: Scheduler, token: int = 7):
    batch = s.schedule()
    deltas = s.update(batch, lambda seqs, rows: [(token, None) for _ in seqs])
    return batch, deltas


def test_whole_prompt_mode_admits_up_to_the_batch_size_and_keeps_rows_in_order():
    s = Scheduler(FakeRunner(whole_prompts=True), max_batch_size=2)
    a, b, c = _seq("a", 5), _seq("b", 3), _seq("c", 4)
    for seq in (a, b, c):
        s.add(seq)
    batch, deltas = _step(s)
    assert batch.prefill == [a, b] and batch.decode == [] and batch.spans == ((0, 5), (0, 3))
    assert [d.token_ids for d in deltas] == [(7,), (7,)] and c.status == RequestStatus.WAITING
    s.abort("a")
    batch, _ = _step(s)
    assert batch.keep == [1] and batch.decode == [b] and batch.prefill == [c]   # a left, c took its slot
    assert a.status == RequestStatus.FINISHED_ABORTED


def test_chunked_prefill_splits_a_long_prompt_and_decode_rows_never_wait():
    s = Scheduler(FakeRunner(), max_batch_size=4, step_tokens=40)
    short, long = _seq("short", 10, max_tokens=8), _seq("long", 100)
    s.add(short)
    _step(s)                                             # short prefilled whole, first token sampled
    s.add(long)
    spans = []
    while long.computed < 100:
        batch, deltas = _step(s)
        assert batch.decode == [short]                   # one token for the running stream every step
        assert any(d.request_id == "short" and d.token_ids == (7,) for d in deltas)
        assert sum(n for _, n in batch.spans) <= 40
        spans.append(batch.spans[-1])
        assert (long in batch.sampling) == (long.computed == 100)
    assert spans == [(0, 39), (39, 39), (78, 22)]
    assert long.output_ids == [7]                        # sampled once, when its prompt completed


def test_chunked_admission_stops_when_the_kv_store_refuses_and_release_runs_when_a_sequence_leaves():
    runner = FakeRunner(room=1)
    s = Scheduler(runner, max_batch_size=8, step_tokens=64)
    a, b = _seq("a", 4, max_tokens=2), _seq("b", 4)
    s.add(a)
    s.add(b)
    _step(s)
    assert a.status == RequestStatus.RUNNING and b.status == RequestStatus.WAITING and s.num_waiting == 1
    _step(s)                                             # a reaches max_tokens
    assert a.status == RequestStatus.FINISHED_LENGTH
    runner.room = 1
    batch, _ = _step(s)                                  # a leaves (released), b joins
    assert runner.released == [a] and batch.prefill == [b]


def test_an_expired_deadline_drops_a_waiting_sequence_instead_of_admitting_it():
    s = Scheduler(FakeRunner(whole_prompts=True), max_batch_size=2)
    running, late = _seq("r", 3, max_tokens=10), _seq("late", 3, deadline=time.monotonic() - 1)
    s.add(running)
    _step(s)
    s.add(late)
    batch, deltas = _step(s)
    assert batch.prefill == [] and batch.decode == [running]
    assert late.status == RequestStatus.FINISHED_ABORTED and late.stop_reason == "deadline"
    assert any(d.request_id == "late" and d.finished for d in deltas)


def test_a_sequence_still_prefilling_sends_no_delta():
    s = Scheduler(FakeRunner(), max_batch_size=2, step_tokens=16)
    s.add(_seq("p", 50))
    batch, deltas = _step(s)
    assert batch.sampling == [] and deltas == []


def test_newcomers_whose_head_is_cached_join_one_step_together():
    """Each newcomer's cost is known at its first chunk (a cached head may leave 10 of 200 tokens): a step
    admits newcomers one by one while tokens are left, not one per step on their whole prompts' length."""
    def cached_head(seq: Sequence) -> None:
        seq.computed = len(seq.prompt_ids) - 10

    s = Scheduler(FakeRunner(on_first_chunk=cached_head), max_batch_size=8, step_tokens=64)
    seqs = [_seq(f"s{i}", 200) for i in range(8)]
    for seq in seqs:
        s.add(seq)
    batch, _ = _step(s)
    assert batch.prefill == seqs[:7] and batch.spans == ((190, 10),) * 6 + ((190, 4),)
    assert seqs[7].status == RequestStatus.WAITING      # the budget ran out: it joins next step


def test_a_newcomer_the_runner_says_waits_stays_in_place_while_those_behind_join():
    """runner.waits (the flattened runner: a prefilling sequence will compute a head it shares) keeps a
    newcomer waiting a step; the one behind it joins; it joins once nothing it waits for is prefilling."""
    leader, follower, other = _seq("leader", 20), _seq("follower", 20), _seq("other", 5)
    runner = FakeRunner(wait_for=lambda seq, prefilling: seq is follower and leader in prefilling)
    s = Scheduler(runner, max_batch_size=8, step_tokens=64)
    for seq in (leader, follower, other):
        s.add(seq)
    batch, _ = _step(s)
    assert batch.prefill == [leader, other] and follower.status == RequestStatus.WAITING
    batch, _ = _step(s)                                  # the leader decodes: the follower joins
    assert batch.decode == [leader, other] and batch.prefill == [follower]
