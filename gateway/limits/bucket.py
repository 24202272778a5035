"""The token bucket: `capacity` tokens, refilled at `rate` per second, never above capacity.

`take(cost, need)`: when the level is at least `need`, subtract `cost` (the level may go below zero, down
to -capacity: usage charged after the fact is a debt paid back by the refill) and allow; otherwise refuse
and say how many seconds until the level reaches `need`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after: float = 0.0      # seconds; meaningful when refused


def refill(level: float, elapsed: float, rate: float, capacity: float) -> float:
    return min(capacity, level + max(0.0, elapsed) * rate)


def decide(level: float, cost: float, need: float, rate: float, capacity: float) -> tuple[Decision, float]:
    """(decision, new level) for a bucket already refilled to `level`."""
    if level < need:
        return Decision(False, (need - level) / rate), level
    return Decision(True), max(-capacity, level - cost)


class MemoryBuckets:
    """Buckets of one process, keyed by name. Single-threaded (the event loop), so no lock."""

    name = "memory"
    errors = 0

    def __init__(self) -> None:
        self._state: dict[str, tuple[float, float]] = {}   # name -> (level, when)

    async def take(self, name: str, capacity: float, rate: float, cost: float, need: float) -> Decision:
        now = time.monotonic()
        level, when = self._state.get(name, (capacity, now))
        decision, level = decide(refill(level, now - when, rate, capacity), cost, need, rate, capacity)
        self._state[name] = (level, now)
        return decision

    async def close(self) -> None:
        self._state.clear()
