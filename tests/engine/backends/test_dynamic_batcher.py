"""The dynamic batcher alone, with a recording `run` (unit tests; the served path is tested over a real
server in tests/gateway/kserve/test_embedding_infer.py)."""
from __future__ import annotations

import asyncio
import threading

import pytest

from conch.engine.admission import QueueTimeout
from conch.engine.backends.dynamic_batcher import DynamicBatcher
from conch.engine.errors import InvalidRequest, Overloaded
from conch.engine.repository.batching import DynamicBatching, QueuePolicy


class Recorder:
    """run(): doubles each payload; records the batches; blocks while `gate` is closed."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, payloads):
        self.gate.wait(10)
        self.batches.append(list(payloads))
        if "boom" in payloads:
            raise RuntimeError("forward failed")
        return [p * 2 for p in payloads]


async def _with(batcher: DynamicBatcher, work):
    batcher.start()
    try:
        return await work
    finally:
        await batcher.stop()


async def _queued(batcher: DynamicBatcher, n: int) -> None:
    while batcher.pending < n:
        await asyncio.sleep(0.001)


async def _blocked(batcher: DynamicBatcher, run: Recorder, payload=0) -> asyncio.Future:
    """A first request whose batch is running and held there (run's gate closed) until `run.gate.set()`."""
    run.gate.clear()
    blocker = asyncio.ensure_future(batcher.submit(payload, 1))
    while not batcher.steps:
        await asyncio.sleep(0.001)
    return blocker


async def test_requests_queued_behind_a_running_batch_run_together():
    run = Recorder()
    b = DynamicBatcher("m", run, max_batch_size=8)

    async def work():
        first = await _blocked(b, run, 0)
        rest = [asyncio.ensure_future(b.submit(i, 1)) for i in range(1, 6)]
        await _queued(b, 5)
        run.gate.set()
        return await asyncio.gather(first, *rest)

    assert await _with(b, work()) == [0, 2, 4, 6, 8, 10]     # each gets its own result
    assert run.batches == [[0], [1, 2, 3, 4, 5]]
    assert b.batch_sizes == {1: 1, 5: 1} and b.steps == 2


async def test_without_dynamic_batching_each_request_runs_alone():
    run = Recorder()
    b = DynamicBatcher("m", run, max_batch_size=8, batch_requests=False)

    async def work():
        run.gate.clear()
        futures = [asyncio.ensure_future(b.submit(i, 1)) for i in range(4)]
        await _queued(b, 3)
        run.gate.set()
        return await asyncio.gather(*futures)

    assert await _with(b, work()) == [0, 2, 4, 6]
    assert all(len(batch) == 1 for batch in run.batches)


async def test_rows_never_exceed_max_batch_size_and_preferred_size_is_cut():
    run = Recorder()
    policy = DynamicBatching(preferred_batch_size=(4,), max_queue_delay_us=10_000_000)
    b = DynamicBatcher("m", run, max_batch_size=6, policy=policy)

    async def work():
        futures = [asyncio.ensure_future(b.submit(i, 2)) for i in range(3)]   # 6 rows: full at once
        await asyncio.gather(*futures)
        futures = [asyncio.ensure_future(b.submit(i, 1)) for i in range(4)]   # 4 rows: preferred
        await asyncio.gather(*futures)

    await asyncio.wait_for(_with(b, work()), 5)        # neither waited for the 10 s delay
    assert run.batches == [[0, 1, 2], [0, 1, 2, 3]]
    with pytest.raises(InvalidRequest):
        await b.submit(0, 7)


async def test_priority_levels_run_first():
    run = Recorder()
    b = DynamicBatcher("m", run, max_batch_size=1, policy=DynamicBatching(priority_levels=2,
                                                                          default_priority_level=2))

    async def work():
        blocker = await _blocked(b, run, 100)
        low = [asyncio.ensure_future(b.submit(i, 1)) for i in (1, 2)]        # priority 0 -> level 2
        high = asyncio.ensure_future(b.submit(3, 1, priority=1))
        await _queued(b, 3)
        run.gate.set()
        await asyncio.gather(blocker, high, *low)

    await _with(b, work())
    assert run.batches == [[100], [3], [1], [2]]
    with pytest.raises(InvalidRequest):
        await b.submit(0, 1, priority=3)


async def test_full_queue_refuses_and_reject_timeout_refuses():
    run = Recorder()
    policy = DynamicBatching(default_queue_policy=QueuePolicy(max_queue_size=1, default_timeout_us=50_000))
    b = DynamicBatcher("m", run, max_batch_size=1, policy=policy)

    async def work():
        blocker = await _blocked(b, run, 0)
        waiting = asyncio.ensure_future(b.submit(1, 1))
        await _queued(b, 1)
        with pytest.raises(Overloaded):
            await b.submit(2, 1)
        with pytest.raises(QueueTimeout):
            await waiting                              # still queued past 50 ms: REJECT
        run.gate.set()
        assert await blocker == 0

    await _with(b, work())


async def test_delay_timeout_runs_after_requests_in_time():
    run = Recorder()
    policy = DynamicBatching(default_queue_policy=QueuePolicy(timeout_action="DELAY", default_timeout_us=1,
                                                              allow_timeout_override=True))
    b = DynamicBatcher("m", run, max_batch_size=1, policy=policy)

    async def work():
        blocker = await _blocked(b, run, 100)
        late = asyncio.ensure_future(b.submit(1, 1))                 # 1 us default timeout: delayed
        await _queued(b, 1)
        await asyncio.sleep(0.01)
        in_time = asyncio.ensure_future(b.submit(2, 1, timeout=60))  # its own timeout overrides
        await _queued(b, 2)
        run.gate.set()
        return await asyncio.gather(blocker, late, in_time)

    assert await _with(b, work()) == [200, 2, 4]                   # DELAY still serves it
    assert run.batches == [[100], [2], [1]]


async def test_a_failed_forward_fails_its_batch_only():
    run = Recorder()
    b = DynamicBatcher("m", run, max_batch_size=4)

    async def work():
        with pytest.raises(RuntimeError):
            await b.submit("boom", 1)
        return await b.submit(5, 1)

    assert await _with(b, work()) == 10


async def test_a_cancelled_request_is_skipped():
    run = Recorder()
    b = DynamicBatcher("m", run, max_batch_size=4)

    async def work():
        blocker = await _blocked(b, run, 0)
        gone = asyncio.ensure_future(b.submit(1, 1))
        kept = asyncio.ensure_future(b.submit(2, 1))
        await _queued(b, 2)
        gone.cancel()
        run.gate.set()
        return await asyncio.gather(blocker, kept)

    assert await _with(b, work()) == [0, 4]
    assert run.batches == [[0], [2]]


async def test_stop_fails_the_running_batch_and_the_queue():
    run = Recorder()
    b = DynamicBatcher("m", run, max_batch_size=1)
    b.start()
    running = await _blocked(b, run, 0)
    queued = asyncio.ensure_future(b.submit(1, 1))
    await _queued(b, 1)
    await b.stop()
    run.gate.set()
    for future in (running, queued):
        with pytest.raises(Overloaded):
            await future
