"""Admission: a bounded priority queue per model in front of its backend, and the trace of each request.

A model has `max_batch_size` slots (a request with n choices takes n, at most all of them). A request that
finds no free slot waits in the model's queue, ordered by (priority, arrival) as in Triton's dynamic
batcher; lower priority values go first. A full queue refuses at once (Overloaded, a 503 with Retry-After:
the seconds until the queue would have drained one place, from a moving average of how long a request holds
its slots, between 1 and 60);
a request still waiting at its deadline (GenerationRequest.deadline, or the model's `queue_timeout`) is
refused with QueueTimeout. `max_queue_size: 0` means unbounded, as in Triton.

Observers (the gateway's metrics and token limits) get every request's `Trace` once it is over.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import AsyncIterator, Protocol

from conch.engine.errors import Overloaded
from conch.engine.repository.config import ModelConfig
from conch.engine.types import GenerationDelta, GenerationRequest, RequestStatus


class QueueTimeout(Overloaded):
    """The request waited in the queue past its deadline."""


@dataclass
class Trace:
    """What happened to one request, in monotonic seconds. Filled in by the engine as deltas pass."""

    request: GenerationRequest
    version: str
    start: float = field(default_factory=time.monotonic)
    queued: float = 0.0                   # seconds spent waiting for a slot (a tensor model: for an instance)
    compute_input: float = 0.0            # seconds preparing the inputs (tokenizing; a tensor model's copies)
    compute_output: float = 0.0           # seconds turning the model's answer into output tensors
    batch_size: int = 0                   # rows of the execution that ran it (0: not batched by a batcher)
    first_token: float | None = None
    end: float | None = None
    cache_hit: bool | None = None         # None: the cache did not apply
    rejected: bool = False                # refused by admission (queue full or timed out)
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finished: int = 0                     # choices that ended
    finish_reasons: list[str] = field(default_factory=list)   # one per ended choice, OpenAI's names
    cached_tokens: int = 0                # prompt tokens reused from the KV cache
    gaps: list[float] = field(default_factory=list)   # inter-token latencies
    _last: dict[int, float] = field(default_factory=dict)

    @property
    def model(self) -> str:
        return self.request.model

    @property
    def duration(self) -> float:
        return (self.end or self.start) - self.start

    @property
    def compute_infer(self) -> float:
        """The rest of the request's time: running the model (so the four parts add up to its duration)."""
        return max(0.0, self.duration - self.queued - self.compute_input - self.compute_output)

    @property
    def cancelled(self) -> bool:
        return not self.rejected and self.error is None and self.finished < self.request.params.n

    @property
    def succeeded(self) -> bool:
        return not self.rejected and self.error is None and not self.cancelled

    def observe(self, delta: GenerationDelta) -> None:
        now = time.monotonic()
        if delta.token_ids:
            if self.first_token is None:
                self.first_token = now
            last = self._last.get(delta.index)
            if last is not None:
                self.gaps.extend([(now - last) / len(delta.token_ids)] * len(delta.token_ids))
            self._last[delta.index] = now
        if delta.error or delta.status == RequestStatus.FINISHED_ERROR:
            self.error = delta.error or "error"
        self.cached_tokens = max(self.cached_tokens, delta.cached_tokens)
        if delta.finished:
            self.finished += 1
            if delta.finish_reason:
                self.finish_reasons.append(delta.finish_reason)
            if delta.usage is not None:
                self.cached_tokens = max(self.cached_tokens, delta.usage.cached_tokens)
                self.prompt_tokens = delta.usage.prompt_tokens
                self.completion_tokens += delta.usage.completion_tokens

    def close(self, exc: BaseException | None = None) -> None:
        self.end = time.monotonic()
        if isinstance(exc, Overloaded):
            self.rejected = True
        elif isinstance(exc, Exception) and self.error is None:
            self.error = str(exc) or type(exc).__name__


class Observer(Protocol):
    def on_finish(self, trace: Trace) -> None: ...


@dataclass(order=True)
class _Waiter:
    priority: int
    arrival: int
    weight: int = field(compare=False)
    future: asyncio.Future = field(compare=False)


class ModelQueue:
    HOLD_SMOOTHING = 0.2                  # weight of the newest request in the average hold time
    RETRY_AFTER_MAX = 60.0
    clock = staticmethod(time.monotonic)

    def __init__(self, config: ModelConfig, max_queue_size: int | None = None) -> None:
        self.used = 0
        self.hold: float | None = None    # seconds a request keeps its slots, moving average
        self._waiters: list[_Waiter] = []
        self._arrival = itertools.count()
        self.configure(config, max_queue_size)

    def configure(self, config: ModelConfig, max_queue_size: int | None = None) -> None:
        self.name = config.name
        self.slots = max(1, config.max_batch_size)
        self.max_queue = config.max_queue_size if max_queue_size is None else max_queue_size
        self.timeout = config.queue_timeout

    @property
    def pending(self) -> int:
        return len(self._waiters)

    def capacity(self, n: int = 1) -> int | None:
        """How many requests of `n` choices an idle model holds at once, running and queued (None: unbounded).
        A request of more prompts than this can never be admitted whole, however long its client waits."""
        if not self.max_queue:
            return None
        return self.slots // min(n, self.slots) + self.max_queue

    @asynccontextmanager
    async def slot(self, request: GenerationRequest, trace: Trace) -> AsyncIterator[None]:
        weight = min(request.params.n, self.slots)
        if not self._waiters and self.used + weight <= self.slots:
            self.used += weight
        else:
            await self._wait(request, weight, trace)
        granted = self.clock()
        try:
            yield
        finally:
            self._observe_hold(self.clock() - granted)
            self._release(weight)

    def _observe_hold(self, seconds: float) -> None:
        a = self.HOLD_SMOOTHING
        self.hold = seconds if self.hold is None else (1 - a) * self.hold + a * seconds

    async def _wait(self, request: GenerationRequest, weight: int, trace: Trace) -> None:
        if self.max_queue and len(self._waiters) >= self.max_queue:
            raise Overloaded(f"model '{self.name}' is overloaded: its queue of {self.max_queue} requests is "
                             f"full; retry later", retry_after=self.retry_after)
        waiter = _Waiter(request.priority, next(self._arrival), weight, asyncio.get_running_loop().create_future())
        heapq.heappush(self._waiters, waiter)
        timeout = self._timeout(request)
        began = time.monotonic()
        try:
            await asyncio.wait_for(waiter.future, timeout)
        except BaseException as exc:
            if waiter.future.done() and not waiter.future.cancelled():
                self._release(weight)            # granted in the same instant it was given up
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
                heapq.heapify(self._waiters)
            self._grant()
            if isinstance(exc, asyncio.TimeoutError):
                raise QueueTimeout(f"request timed out after {timeout:.3g}s in the queue of model "
                                   f"'{self.name}'", retry_after=self.retry_after) from None
            raise
        finally:
            trace.queued = time.monotonic() - began

    def _timeout(self, request: GenerationRequest) -> float | None:
        limits = [t for t in (self.timeout, None if request.deadline is None else
                              request.deadline - time.monotonic()) if t is not None]
        return max(0.0, min(limits)) if limits else None

    def _release(self, weight: int) -> None:
        self.used -= weight
        self._grant()

    def _grant(self) -> None:
        while self._waiters and self.used + self._waiters[0].weight <= self.slots:
            waiter = heapq.heappop(self._waiters)
            if not waiter.future.done():
                self.used += waiter.weight
                waiter.future.set_result(None)

    @property
    def retry_after(self) -> float:
        """Slots free up at about `slots / hold` per second; a newcomer waits for everyone queued before it."""
        if self.hold is None:
            return 1.0
        drain = (len(self._waiters) + 1) * self.hold / self.slots
        return float(min(self.RETRY_AFTER_MAX, max(1, math.ceil(drain))))


class Admission:
    """The queues of every model. `max_queue_size` (from `--max-queue-size`) overrides each config's."""

    def __init__(self, max_queue_size: int | None = None) -> None:
        self.max_queue_size = max_queue_size
        self._queues: dict[str, ModelQueue] = {}

    def queue(self, config: ModelConfig) -> ModelQueue:
        q = self._queues.get(config.name)
        if q is None:
            q = self._queues[config.name] = ModelQueue(config, self.max_queue_size)
        else:
            q.configure(config, self.max_queue_size)
        return q

    def pending(self, model: str) -> int:
        q = self._queues.get(model)
        return q.pending if q is not None else 0
