"""A python model's instances (Triton's `instance_group { count: N }`): N `TritonPythonModel` objects, each
initialized with its own `model_instance_name`, each running one `execute` at a time, N at once.

Invariant: at most N callers hold an instance. Callers on the event loop take one of the N slots first
(`run`); the dynamic batcher runs at most N batches at once, so `borrow` in its worker thread never waits.
"""
from __future__ import annotations

import asyncio
import queue
from contextlib import AbstractAsyncContextManager, contextmanager, nullcontext
from typing import Any, Callable, Iterator

from conch.engine import torch_threads

Admit = Callable[[], AbstractAsyncContextManager]    # held around each execution (the rate limiter's resources)


class InstancePool:
    def __init__(self, instances: list[Any], admit: Admit | None = None) -> None:
        self.instances, self.admit = instances, admit or nullcontext
        self._free: queue.SimpleQueue = queue.SimpleQueue()
        for instance in instances:
            self._free.put(instance)
        self._slots = asyncio.Semaphore(len(instances))

    def __len__(self) -> int:
        return len(self.instances)

    @contextmanager
    def borrow(self) -> Iterator[Any]:
        """A free instance, in a worker thread (the caller holds a slot, so one is free)."""
        instance = self._free.get_nowait()
        try:
            yield instance
        finally:
            self._free.put(instance)

    async def run(self, work: Callable[[Any], Any]) -> Any:
        """`work(instance)` in a worker thread on a free instance, waiting for one if all are busy, then for
        the resources its executions hold."""
        async with self._slots, self.admit():
            return await torch_threads.run(self._borrowed, work)

    def _borrowed(self, work: Callable[[Any], Any]) -> Any:
        with self.borrow() as instance:
            return work(instance)
