"""Triton's rate limiter: executions hold their instance's resources; capacity is the largest single need;
waiters go by priority, then arrival."""
from __future__ import annotations

import asyncio

from conch.engine.repository.triton_keys import RateLimit
from conch.engine.resources import ResourceLimiter


def test_executions_sharing_a_resource_take_turns_by_priority():
    async def scenario() -> list[str]:
        limiter, order = ResourceLimiter(), []
        one, low, high = RateLimit((("R", 1),), 5), RateLimit((("R", 1),), 5), RateLimit((("R", 1),), 1)
        for limit in (one, low, high):
            limiter.register(limit)
        release = asyncio.Event()

        async def run(name: str, limit: RateLimit, wait: asyncio.Event | None = None) -> None:
            async with limiter.hold(limit):
                order.append(name)
                if wait is not None:
                    await wait.wait()

        first = asyncio.create_task(run("first", one, release))
        await asyncio.sleep(0)
        later = [asyncio.create_task(run("low", low)), asyncio.create_task(run("high", high))]
        await asyncio.sleep(0)
        assert order == ["first"] and limiter.used == {"R": 1}       # both others wait for R
        release.set()
        await asyncio.gather(first, *later)
        assert limiter.used == {"R": 0}
        return order

    assert asyncio.run(scenario()) == ["first", "high", "low"]


def test_capacity_is_the_largest_need_and_unrelated_resources_do_not_block():
    async def scenario() -> None:
        limiter = ResourceLimiter()
        big, small, other = RateLimit((("R", 2),)), RateLimit((("R", 1),)), RateLimit((("S", 1),))
        for limit in (big, small, other):
            limiter.register(limit)
        assert limiter.capacity == {"R": 2, "S": 1}
        async with limiter.hold(small), limiter.hold(small), limiter.hold(other), limiter.hold(None):
            assert limiter.used == {"R": 2, "S": 1}
        waiting = asyncio.create_task(_hold_twice(limiter, small))
        await waiting
        assert limiter.used == {"R": 0, "S": 0}

    asyncio.run(scenario())


async def _hold_twice(limiter: ResourceLimiter, limit: RateLimit) -> None:
    async with limiter.hold(limit):
        async with limiter.hold(limit):
            pass
