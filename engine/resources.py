"""Triton's rate limiter: an instance whose `instance_group` declares `rate_limiter { resources [...] priority }`
executes only while it holds every resource it names, so models that share a resource (a GPU's memory, a
licence) never run more executions at once than the resource allows.

A resource's capacity is the largest count any one loaded instance asks for (Triton's default when the server
names no capacity), so every instance can run alone and two that each need all of it take turns. Waiters are
served in (priority, arrival) order, lower priority first; the first waiter blocks those behind it (no
starvation of a large request). `global` resources and per-device ones are one pool on a CPU server.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import AsyncIterator

from conch.engine.repository.triton_keys import RateLimit


@dataclass(order=True)
class _Waiter:
    priority: int
    arrival: int
    needs: dict[str, int] = field(compare=False)
    future: asyncio.Future = field(compare=False)


class ResourceLimiter:
    def __init__(self) -> None:
        self.capacity: dict[str, int] = {}
        self.used: dict[str, int] = {}
        self._waiters: list[_Waiter] = []
        self._arrival = itertools.count()

    def register(self, limit: RateLimit) -> None:
        """A loaded instance's needs raise each resource's capacity to at least them."""
        for name, count in limit.resources:
            self.capacity[name] = max(self.capacity.get(name, 0), count)

    @asynccontextmanager
    async def hold(self, limit: RateLimit | None) -> AsyncIterator[None]:
        if limit is None or not limit.resources:
            yield
            return
        needs = dict(limit.resources)
        waiter = _Waiter(limit.priority, next(self._arrival), needs, asyncio.get_running_loop().create_future())
        heapq.heappush(self._waiters, waiter)
        self._grant()
        try:
            await waiter.future
        except BaseException:
            if waiter.future.done() and not waiter.future.cancelled():
                self._release(needs)                 # granted as it was given up
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
                heapq.heapify(self._waiters)
                self._grant()
            raise
        try:
            yield
        finally:
            self._release(needs)

    def _fits(self, needs: dict[str, int]) -> bool:
        return all(self.used.get(n, 0) + c <= self.capacity.get(n, 0) for n, c in needs.items())

    def _grant(self) -> None:
        while self._waiters and self._fits(self._waiters[0].needs):
            waiter = heapq.heappop(self._waiters)
            if waiter.future.done():
                continue
            for name, count in waiter.needs.items():
                self.used[name] = self.used.get(name, 0) + count
            waiter.future.set_result(None)

    def _release(self, needs: dict[str, int]) -> None:
        for name, count in needs.items():
            self.used[name] -= count
        self._grant()

