"""Triton's dynamic batcher for non-LLM models: requests queue, a batch forms, it runs as one forward.

Each submitted request carries `rows` (its share of the batch dimension, already validated: nothing in a
batch can fail for one request's input). A batch takes requests in (priority level, delayed, arrival) order
while their rows fit `max_batch_size`. It runs at once when it is full or its rows are a preferred size;
otherwise it waits for more requests until its oldest request has waited `max_queue_delay_microseconds`
(0: never waits). Up to `instances` batches run at once (Triton's instance_group count; one by default), each
in a worker thread, as `run(items) -> per-item results`.

Queue policy, per priority level: a full queue (`max_queue_size`) refuses at once (Overloaded); a request
still queued past its timeout is refused (REJECT, QueueTimeout) or runs after every request still in time
(DELAY). `steps` counts executions (Triton's nv_inference_exec_count); `batch_sizes` how many rows each had.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import Counter
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from conch.engine import torch_threads
from conch.engine.admission import QueueTimeout
from conch.engine.errors import InvalidRequest, ModelNotReady, Overloaded
from conch.engine.repository.batching import DynamicBatching

log = logging.getLogger(__name__)
RunBatch = Callable[[list[Any]], Sequence[Any]]   # payloads -> one result per payload, same order


@dataclass(eq=False)
class _Pending:
    payload: Any
    rows: int
    level: int
    arrival: int
    enqueued: float
    deadline: float | None
    delay_on_timeout: bool
    future: asyncio.Future
    delayed: bool = False

    @property
    def key(self) -> tuple[int, bool, int]:
        return (self.level, self.delayed, self.arrival)


@dataclass
class DynamicBatcher:
    name: str
    run: RunBatch
    max_batch_size: int
    policy: DynamicBatching | None = None       # None: Triton's defaults
    batch_requests: bool = True                 # False: each request runs alone (no dynamic batching)
    instances: int = 1                          # batches that may run at once
    admit: Callable[[], AbstractAsyncContextManager] = nullcontext   # held around each batch (rate limiter)
    steps: int = 0
    batch_sizes: Counter = field(default_factory=Counter)
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self.rules: DynamicBatching = self.policy or DynamicBatching()     # the policy in force
        self._queue: list[_Pending] = []
        self._arrival = itertools.count()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._running: set[asyncio.Task] = set()    # batches in flight (at most `instances`)

    @property
    def pending(self) -> int:
        return len(self._queue)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name=f"batcher-{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
        for p in self._queue:
            if not p.future.done():
                p.future.set_exception(Overloaded(f"model '{self.name}' is stopping"))
        self._queue.clear()

    async def submit(self, payload: Any, rows: int, priority: int = 0, timeout: float | None = None) -> Any:
        """Queue one validated request and wait for its result. `rows` <= max_batch_size (the caller splits)."""
        if not 0 < rows <= self.max_batch_size:
            raise InvalidRequest(f"a request of {rows} rows does not fit model '{self.name}' "
                                 f"(max_batch_size {self.max_batch_size})")
        level = self.rules.level(priority)
        queue_policy = self.rules.policy(level)
        if self._task is None or self._task.done():
            raise ModelNotReady(f"model '{self.name}' is not serving (its batcher is stopped)")
        if queue_policy.max_queue_size and self._level_size(level) >= queue_policy.max_queue_size:
            raise Overloaded(f"model '{self.name}' is overloaded: its queue of {queue_policy.max_queue_size} "
                             f"requests at priority level {level} is full; retry later")
        limit = queue_policy.default_timeout_us / 1e6 or None
        if timeout is not None and (queue_policy.allow_timeout_override or limit is None):
            limit = timeout
        now = self.clock()
        pending = _Pending(payload, rows, level, next(self._arrival), now, None if limit is None else now + limit,
                           queue_policy.timeout_action == "DELAY", asyncio.get_running_loop().create_future())
        self._queue.append(pending)
        self._wake.set()
        return await self._result(pending, None if pending.delay_on_timeout else limit)

    async def _result(self, pending: _Pending, reject_after: float | None) -> Any:
        """The request's result; refused at its timeout if it is still queued then (REJECT), even while
        another batch runs. A cancelled caller (client gone) cancels the request: the loop skips it."""
        try:
            if reject_after is None:
                return await pending.future
            try:
                return await asyncio.wait_for(asyncio.shield(pending.future), reject_after)
            except asyncio.TimeoutError:
                if pending not in self._queue:           # already in a running batch: its result comes
                    return await pending.future
                self._queue.remove(pending)
                raise QueueTimeout(f"request timed out after {reject_after:.3g}s in the queue of model "
                                   f"'{self.name}'") from None
        except asyncio.CancelledError:
            pending.future.cancel()
            raise

    def _level_size(self, level: int) -> int:
        return sum(1 for p in self._queue if p.level == level)

    async def _loop(self) -> None:
        try:
            await self._serve()
        except Exception as exc:                   # a bug here must not leave callers waiting forever
            log.exception("batcher of model %s failed", self.name)
            for p in self._queue:
                if not p.future.done():
                    p.future.set_exception(exc)
            self._queue.clear()
            raise

    async def _serve(self) -> None:
        while True:
            if len(self._running) >= max(1, self.instances):      # every instance busy: wait for one
                await asyncio.wait(self._running, return_when=asyncio.FIRST_COMPLETED)
                continue
            batch, wait = self._form()
            if not batch:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), wait)
                except asyncio.TimeoutError:
                    pass
                continue
            if self.instances <= 1:
                await self._execute(batch)
                continue
            task = asyncio.get_running_loop().create_task(self._execute(batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    def _form(self) -> tuple[list[_Pending], float | None]:
        """The batch to run now, or ([], seconds to wait before looking again; None = until a request comes)."""
        self._expire()
        self._queue.sort(key=lambda p: p.key)
        taken, rows = [], 0
        for p in self._queue:
            if rows + p.rows > self.max_batch_size:
                break
            taken.append(p)
            rows += p.rows
        if not taken:
            return [], self._next_deadline()
        if not self.batch_requests:
            return self._take(taken[:1]), None
        preferred = [s for s in self.rules.preferred_batch_size if s <= rows]
        if rows >= self.max_batch_size or rows in self.rules.preferred_batch_size:
            return self._take(taken), None
        if preferred:                              # the largest preferred size a prefix of the queue makes
            prefix = list(itertools.accumulate(p.rows for p in taken))
            for size in reversed(preferred):
                if size in prefix:
                    return self._take(taken[:prefix.index(size) + 1]), None
        waited = self.clock() - min(p.enqueued for p in taken)
        delay = self.rules.max_queue_delay_us / 1e6
        if waited >= delay:
            return self._take(taken), None
        deadline = self._next_deadline()
        return [], delay - waited if deadline is None else min(delay - waited, deadline)

    def _take(self, batch: list[_Pending]) -> list[_Pending]:
        chosen = set(map(id, batch))
        self._queue = [p for p in self._queue if id(p) not in chosen]
        return batch

    def _expire(self) -> None:
        """Drop cancelled requests; refuse (REJECT) or demote (DELAY) those past their timeout."""
        now, kept = self.clock(), []
        for p in self._queue:
            if p.future.done():
                continue
            if p.deadline is not None and now >= p.deadline and not p.delayed:
                if not p.delay_on_timeout:
                    p.future.set_exception(QueueTimeout(
                        f"request timed out after {p.deadline - p.enqueued:.3g}s in the queue of model '{self.name}'"))
                    continue
                p.delayed = True
            kept.append(p)
        self._queue = kept

    def _next_deadline(self) -> float | None:
        deadlines = [p.deadline for p in self._queue if p.deadline is not None and not p.delayed]
        return max(0.0, min(deadlines) - self.clock()) if deadlines else None

    async def _execute(self, batch: list[_Pending]) -> None:
        live = [p for p in batch if not p.future.done()]
        if not live:
            return
        self.steps += 1
        self.batch_sizes[sum(p.rows for p in live)] += 1
        try:
            async with self.admit():
                results = await torch_threads.run(self.run, [p.payload for p in live])
        except BaseException as exc:               # the forward failed (or the batcher stops): the batch sees it
            failure = exc if isinstance(exc, Exception) else Overloaded(f"model '{self.name}' is stopping")
            for p in live:
                if not p.future.done():
                    p.future.set_exception(failure)
            if not isinstance(exc, Exception):
                raise
            return
        for p, result in zip(live, results, strict=True):
            if not p.future.done():
                p.future.set_result(result)
