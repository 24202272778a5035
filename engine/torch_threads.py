"""Threads for torch's work that exit once idle, so that only threads with work keep OpenMP workers.

torch's OpenMP runtime (libgomp) keeps a team of workers for every thread that has run a parallel region, for
as long as that thread lives. Once the process holds more of those workers than it has cores, libgomp stops
spinning between regions and every region waits on a futex wake-up, so each thread's parallel work slows
down, the own engine's decode steps included. A thread that runs torch work therefore lives while it has work
and LINGER_S more: `Lingering` runs jobs (an embedding batch, a python model's execute, a load) on threads
that exit after LINGER_S without one, instead of asyncio's executor, whose threads live as long as the
process; the own engine's thread parks the same way (backends/conch/core/engine_core.py).

Invariant (under `_cond`): each job claims an idle thread no other job has claimed, or starts a thread, or
(`most` threads busy) waits for one to finish; a thread exits only after a wait that found no job and no
claim on it, so no job is left without a thread to run it.
"""
from __future__ import annotations

import asyncio
import itertools
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable

# seconds a thread for torch's work waits for more before it exits (its OpenMP workers too): while it waits,
# its team still slows every other thread's parallel work; past it, the next job pays a thread's start
LINGER_S = 0.05


class Lingering:
    """Runs each job on one of up to `most` threads, in submission order; an idle thread exits after LINGER_S."""

    def __init__(self, name: str, most: int = 32) -> None:
        self.name, self.most = name, most
        self._cond = threading.Condition()
        self._jobs: deque[tuple[Future, Callable[..., Any], tuple]] = deque()
        self._idle = 0                 # threads waiting for a job
        self._claims = 0               # of those, how many a submitted job counts on (<= _idle)
        self._threads = 0
        self._numbers = itertools.count(1)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        with self._cond:
            self._jobs.append((future, fn, args))
            if self._idle > self._claims:           # an idle thread nobody has claimed yet: this job's
                self._claims += 1
                self._cond.notify()
            elif self._threads < self.most:
                self._threads += 1
                threading.Thread(target=self._work, name=f"{self.name}-{next(self._numbers)}", daemon=True).start()
        return future

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args) on one of the threads, awaited on the event loop (as asyncio.to_thread)."""
        return await asyncio.wrap_future(self.submit(fn, *args))

    @property
    def threads(self) -> int:
        return self._threads

    def _work(self) -> None:
        while (job := self._next()) is not None:
            future, fn, args = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:         # the caller's to see
                    future.set_exception(exc)
            del job, future, fn, args                # an idle thread holds no finished job's arguments

    def _next(self) -> tuple[Future, Callable[..., Any], tuple] | None:
        """The next job, waiting up to LINGER_S at a time while claimed; None (the thread then exits) once a
        wait ends with no job and no claim."""
        with self._cond:
            while not self._jobs:
                self._idle += 1
                self._cond.wait(LINGER_S)
                self._idle -= 1
                if self._claims:                   # counted on: this thread stands for that claim
                    self._claims -= 1
                elif not self._jobs:
                    self._threads -= 1
                    return None
            return self._jobs.popleft()


_shared = Lingering("torch")


async def run(fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) on a thread of the process's shared `Lingering` (in place of asyncio.to_thread for torch work)."""
    return await _shared.run(fn, *args)
