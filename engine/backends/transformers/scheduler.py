"""Continuous batching. There is no prefill phase and decode phase: every step, the sequences that
finished since the last step leave, waiting sequences join while there are free slots (their prompts are
prefilled in that step), and every running sequence gets one token.

Invariant: `running[i]` owns row i of the runner's KV cache after `Batch.keep` has been applied.
"""
from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass

from engine.backends.transformers.sequence import Sequence
from engine.types import GenerationDelta, PositionLogprobs, RequestStatus


@dataclass(frozen=True)
class Batch:
    keep: list[int]          # rows of the previous step's batch that continue, in order
    decode: list[Sequence]   # the continuing sequences, one row each
    prefill: list[Sequence]  # newcomers, appended after the decode rows

    @property
    def seqs(self) -> list[Sequence]:
        return self.decode + self.prefill

    @property
    def empty(self) -> bool:
        return not self.decode and not self.prefill


class Scheduler:
    def __init__(self, max_batch_size: int, max_prefill_tokens: int = 4096) -> None:
        self.max_batch_size = max_batch_size
        self.max_prefill_tokens = max_prefill_tokens
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

    def schedule(self) -> Batch:
        keep = [row for row, seq in enumerate(self.running) if not seq.status.is_finished]
        decode = [self.running[row] for row in keep]
        prefill = self._admit(self.max_batch_size - len(decode))
        self.running = decode + prefill
        return Batch(keep, decode, prefill)

    def _admit(self, free: int) -> list[Sequence]:
        admitted: list[Sequence] = []
        budget = self.max_prefill_tokens
        now = time.monotonic()
        while self._waiting and len(admitted) < free:
            seq = self._waiting[0][2]
            if seq.request.deadline is not None and now > seq.request.deadline:
                heapq.heappop(self._waiting)
                seq.finish(RequestStatus.FINISHED_ABORTED, "deadline")
                self._dropped.append(seq)
                continue
            if admitted and len(seq.prompt_ids) > budget:
                break
            heapq.heappop(self._waiting)
            seq.status = RequestStatus.RUNNING
            budget -= len(seq.prompt_ids)
            admitted.append(seq)
        return admitted

    def update(self, batch: Batch, sampled: list[tuple[int, PositionLogprobs | None] | None]) -> list[GenerationDelta]:
        """Record one token per sequence (None: its sampling failed); return a delta per sequence that has news.

        A sequence whose grammar matcher raises (or rejects the token) ends alone, with its error."""
        for seq, row in zip(batch.seqs, sampled, strict=True):
            if seq.status.is_finished or row is None:   # aborted during the forward pass, or failed
                continue
            try:
                if seq.matcher is not None and not seq.matcher.accept(row[0]):
                    seq.fail("grammar rejected a sampled token")
                    continue
                seq.append(*row)
            except Exception as exc:
                seq.fail(f"this request's grammar failed: {exc}")
        return [d for d in map(Sequence.drain, batch.seqs) if d is not None] + self.drain_dropped()

    def drain_dropped(self) -> list[GenerationDelta]:
        deltas = [d for d in map(Sequence.drain, self._dropped) if d is not None]
        self._dropped.clear()
        return deltas
