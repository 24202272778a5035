"""Continuous batching. There is no prefill phase and decode phase: every step, the sequences that
finished since the last step leave, waiting sequences join while there are free slots, and every running
sequence past its prompt gets one token (or, with the flattened runner, up to k proposed ones after its last
token, of which it keeps those sampling agrees with, and one token more: speculation/). Prompts are prefilled
whole in the step that admits them (a runner with `whole_prompts`, the HF one), or in chunks under a per-step
token budget mixed with the decode rows (the flattened runner).

Invariants: `seq.computed` tokens of every running sequence have their KV stored (the runner sets it on
admission and first chunk, `update` after each step); with `whole_prompts`, `running[i]` owns row i of the
runner's KV after `Batch.keep` has been applied. A decode row that accepted a proposals this step has the KV
of its a accepted tokens too (computed from the right tokens); the KV of the rejected ones lies past
`computed`, where the store's columns are overwritten by later steps.
"""
from __future__ import annotations

import heapq
import itertools
import time

from conch.engine.backends.conch.core.batch import Batch, make_batch
from conch.engine.backends.conch.runners.runner import Runner
from conch.engine.backends.conch.core.sequence import Sequence
from conch.engine.backends.conch.speculation import Speculation, verify
from conch.engine.backends.conch.speculation.verify import Sample, Sampled
from conch.engine.backends.conch.core.stall_budget import Allotment, StallBudget
from conch.engine.types import GenerationDelta, RequestStatus


class Scheduler:
    """A runner with `whole_prompts` (the HF one): every newcomer is prefilled whole in the step that admits it,
    up to WHOLE_PREFILL_TOKENS of prompts a step (the first always).
    Otherwise chunked prefill, as vLLM's scheduler does: every decode row gets its token, then the prompts
    still prefilling (oldest first), then newcomers, share what is left of `step_tokens`.
    Either way a newcomer joins only if `runner.admit(seq)` (its KV room) takes it, and `runner.release(seq)`
    runs once it has left.
    While rows decode, the prompt chunks of a step share an allotment of seconds from `budget`
    (stall_budget.py) so that the streams' inter-token gap stays within a few decode-only steps; a step with
    no decode rows, or with more prompts waiting for their first token than rows decoding, takes N.
    `runner.first_chunk(seq)` runs when a sequence's first chunk is scheduled, which may be steps after it joined:
    the runner may then advance `seq.computed` past a prompt head that an earlier prompt has since cached.
    A newcomer the runner says `waits` (a sequence still prefilling will compute a head it shares: the flattened
    runner's kv/shared_heads.py) stays waiting this step, in its place, and the ones behind it may join."""

    MIN_CHUNK = 32        # prompt tokens a step computes even when the decode rows use the whole budget
    WHOLE_PREFILL_TOKENS = 4096     # whole prompts one step prefills (beyond the first newcomer's)

    def __init__(self, runner: Runner, max_batch_size: int, step_tokens: int = 2048, stall: float = 2.0,
                 speculation: Speculation | None = None) -> None:
        self.runner = runner
        # proposals of decode rows (chunked mode only: the flattened runner); None: none
        self.speculation = speculation if speculation is not None else Speculation()
        self.proposed_tokens = 0             # cumulative proposals computed, and those accepted (stats())
        self.accepted_tokens = 0
        self.max_batch_size = max_batch_size
        self.step_tokens = step_tokens
        self.budget = StallBudget(stall=stall, min_tokens=self.MIN_CHUNK)
        self.running: list[Sequence] = []
        self._waiting: list[tuple[int, int, Sequence]] = []   # heap of (priority, arrival, seq)
        self._arrival = itertools.count()
        self._dropped: list[Sequence] = []                  # aborted or expired while waiting

    @property
    def num_running(self) -> int:
        return sum(not s.status.is_finished for s in self.running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def has_work(self) -> bool:
        return bool(self.running or self._waiting or self._dropped)

    def add(self, seq: Sequence) -> None:
        heapq.heappush(self._waiting, (seq.request.priority, next(self._arrival), seq))

    def abort(self, request_id: str, index: int | None = None) -> None:
        """Abort the request's sequences (only choice `index` if given), running or waiting."""
        def hit(seq: Sequence) -> bool:
            return seq.request_id == request_id and (index is None or seq.index == index)

        for seq in self.running:
            if hit(seq) and not seq.status.is_finished:
                seq.finish(RequestStatus.FINISHED_ABORTED)
                self._dropped.append(seq)          # its final delta goes out with the next step
        kept = [item for item in self._waiting if not hit(item[2])]
        for _, _, seq in self._waiting:
            if hit(seq):
                seq.finish(RequestStatus.FINISHED_ABORTED)
                self._dropped.append(seq)
        self._waiting = kept
        heapq.heapify(self._waiting)

    def take_waiting(self) -> list[Sequence]:
        """Every waiting sequence, removed (the engine can no longer run them)."""
        taken = [seq for _, _, seq in self._waiting]
        self._waiting = []
        return taken

    def leave_all(self) -> None:
        """Every running sequence leaves (the step failed); their KV is released."""
        for seq in self.running:
            self.runner.release(seq)
        self.running = []

    def schedule(self) -> Batch:
        keep = [row for row, seq in enumerate(self.running) if not seq.status.is_finished]
        for seq in self.running:
            if seq.status.is_finished:
                self.runner.release(seq)
        continuing = [self.running[row] for row in keep]
        if self.runner.whole_prompts:
            prefill = self._admit_whole(self.max_batch_size - len(continuing))
            self.running = continuing + prefill
            return make_batch(keep, continuing, [(s, len(s.prompt_ids)) for s in prefill])
        return self._schedule_chunked(keep, continuing)

    def _schedule_chunked(self, keep: list[int], continuing: list[Sequence]) -> Batch:
        decode = [s for s in continuing if s.computed >= len(s.prompt_ids)]
        drafts = self.speculation.drafts(decode)
        waiting = len(continuing) - len(decode) + len(self._waiting)
        allot = self.budget.allot(len(decode), waiting)
        rows = len(decode) + sum(map(len, drafts))
        tokens = max(self.step_tokens - rows, self.MIN_CHUNK)      # and the step's token cap
        chunks: list[tuple[Sequence, int]] = []
        for seq in continuing:
            if seq.computed < len(seq.prompt_ids) and tokens > 0 and allot.open:
                chunks.append((seq, self._chunk(seq, tokens, allot)))
                tokens -= chunks[-1][1]
        admitted: list[Sequence] = []
        prefilling = [s for s in continuing if s.computed < len(s.prompt_ids)]
        deferred: list[tuple[int, int, Sequence]] = []       # newcomers waiting for a head another computes
        # newcomers join one by one while tokens are left: each first chunk may find a cached head, so what a
        # newcomer costs is known only once it is scheduled (an agent's 1.2k-token prompt may leave 200)
        while tokens > 0 and allot.open and len(continuing) + len(admitted) < self.max_batch_size:
            while self._waiting and self.runner.waits(self._waiting[0][2], prefilling):
                deferred.append(heapq.heappop(self._waiting))
            newcomer = self._pop_admissible(None)
            if newcomer is None:
                break
            admitted.append(newcomer)
            chunks.append((newcomer, self._chunk(newcomer, tokens, allot)))
            tokens -= chunks[-1][1]
            if newcomer.computed < len(newcomer.prompt_ids):
                prefilling.append(newcomer)
        for item in deferred:
            heapq.heappush(self._waiting, item)
        self.running = continuing + admitted
        return make_batch(keep, decode, chunks, drafts)

    def _chunk(self, seq: Sequence, tokens: int, allot: Allotment) -> int:
        """Prompt tokens `seq` computes this step (at least 1: a cached head leaves one to compute)."""
        if not seq.started:
            seq.started = True
            self.runner.first_chunk(seq)
        return seq.prompt_chunk(allot.take(seq.computed, min(len(seq.prompt_ids) - seq.computed, tokens)))

    def _admit_whole(self, free: int) -> list[Sequence]:
        """Newcomers prefilled whole this step: up to `free`, within WHOLE_PREFILL_TOKENS (the first always)."""
        admitted: list[Sequence] = []
        budget = self.WHOLE_PREFILL_TOKENS
        while len(admitted) < free:
            seq = self._pop_admissible(budget if admitted else None)
            if seq is None:
                break
            budget -= len(seq.prompt_ids)
            admitted.append(seq)
        return admitted

    def _pop_admissible(self, longest: int | None) -> Sequence | None:
        """The first waiting sequence, running now, if its prompt has at most `longest` tokens (None: any)
        and the runner admits it; those past their deadline on the way leave, aborted."""
        now = time.monotonic()
        while self._waiting:
            seq = self._waiting[0][2]
            if seq.request.deadline is not None and now > seq.request.deadline:
                heapq.heappop(self._waiting)
                seq.finish(RequestStatus.FINISHED_ABORTED, "deadline")
                self._dropped.append(seq)
                continue
            if (longest is not None and len(seq.prompt_ids) > longest) or not self.runner.admit(seq):
                return None
            heapq.heappop(self._waiting)
            seq.status = RequestStatus.RUNNING
            return seq
        return None

    def observe(self, batch: Batch, seconds: float) -> None:
        """The wall time of the step that computed `batch` (it tunes the chunked prefill's budget)."""
        if not self.runner.whole_prompts:
            self.budget.observe(len(batch.decode), list(batch.spans[len(batch.decode):]), seconds)

    def update(self, batch: Batch, sample: Sample) -> list[GenerationDelta]:
        """Record the step's tokens: `sample(seqs, rows)` gives a token (None: its sampling failed) per sequence
        from the runner's logits rows `rows`; a decode row with proposals is sampled row by row while they
        match (speculation/verify.py). Returns a delta per sequence that has news.

        A sequence whose grammar matcher raises (or rejects the token) ends alone, with its error."""
        sampling = batch.sampling
        accepted = verify(sampling, batch.drafts, sample, self._record)
        self.proposed_tokens += sum(map(len, batch.drafts))
        self.accepted_tokens += sum(accepted)
        for i, (seq, (start, n)) in enumerate(zip(batch.seqs, batch.spans, strict=True)):
            seq.computed = max(seq.computed, start + n + (accepted[i] if i < len(batch.decode) else 0))
        news = [s for s in batch.seqs if s.status.is_finished or s in sampling]
        return [d for d in map(Sequence.drain, news) if d is not None] + self.drain_dropped()

    @staticmethod
    def _record(seq: Sequence, row: Sampled | None) -> bool:
        """Take a sampled token into `seq` (its matcher, then its output); False if it was not taken or `seq`
        has finished."""
        if seq.status.is_finished or row is None:   # aborted during the forward pass, or failed
            return False
        try:
            if seq.matcher is not None and not seq.matcher.accept(row[0]):
                seq.fail("the request's grammar reached a state that no token of this model's vocabulary "
                         "continues (it rejected the only tokens left)", is_request=True)
                return False
            seq.append(*row)
        except Exception as exc:
            seq.fail(f"this request's grammar failed: {exc}")
        return not seq.status.is_finished

    def drain_dropped(self) -> list[GenerationDelta]:
        deltas = [d for d in map(Sequence.drain, self._dropped) if d is not None]
        self._dropped.clear()
        return deltas
