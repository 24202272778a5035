"""Admission: a bounded priority queue per model. Unit cases over a fake backend, then a flood of 200
requests through a real server with a queue of 32: fast 503s with Retry-After, nothing lost, nothing hung."""
from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conch.engine.admission import QueueTimeout, Trace
from conch.engine.errors import Overloaded
from conch.engine.types import GenerationRequest, SamplingParams
from tests.conftest import start_server, write_repository
from tests.serving_helpers import fake_engine


class Traces:
    def __init__(self) -> None:
        self.seen = []

    def on_finish(self, trace) -> None:
        self.seen.append(trace)


def _request(i: int, priority: int = 0, **kw) -> GenerationRequest:
    return GenerationRequest(id=f"r{i}", model="m", prompt="hi", priority=priority,
                             params=SamplingParams(max_tokens=2, temperature=0.0), **kw)


async def _consume(engine, request):
    return [d async for d in engine.generate(request)]


async def _until(predicate, tries: int = 500):
    for _ in range(tries):
        if predicate():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never became true")


def _labels(keys: list[str]) -> list[str]:
    """The callers' ids in engine keys ("<counter>.<label>": the engine keys every request by its own id)."""
    return [key.split(".", 1)[1] for key in keys]


async def test_full_queue_refuses_at_once_and_priorities_order_the_rest():
    engine = fake_engine(max_batch_size=1, max_queue_size=3)
    backend = engine.get("m").backend
    backend.gate = asyncio.Event()
    queue = engine.admission.queue(engine.get("m").config)
    tasks = [asyncio.ensure_future(_consume(engine, _request(0)))]
    await _until(lambda: backend.calls == 1)
    for i, priority in ((1, 5), (2, 1), (3, 3)):
        tasks.append(asyncio.ensure_future(_consume(engine, _request(i, priority))))
    await _until(lambda: queue.pending == 3)
    with pytest.raises(Overloaded) as refused:
        await engine.generate(_request(9)).__anext__()
    assert refused.value.retry_after >= 1
    backend.gate.set()
    await asyncio.gather(*tasks)
    assert _labels(backend.seen) == ["r0", "r2", "r3", "r1"]
    assert queue.pending == 0 and queue.used == 0


async def test_queue_timeout_and_deadline():
    engine = fake_engine(max_batch_size=1, queue_timeout=0.01)
    backend = engine.get("m").backend
    backend.gate = asyncio.Event()
    first = asyncio.ensure_future(_consume(engine, _request(0)))
    await _until(lambda: backend.calls == 1)
    with pytest.raises(QueueTimeout):
        await _consume(engine, _request(1))
    with pytest.raises(QueueTimeout):
        await _consume(engine, _request(2, deadline=time.monotonic()))
    backend.gate.set()
    await first
    assert engine.admission.queue(engine.get("m").config).used == 0


async def test_cancelled_while_queued_leaves_the_queue_and_is_counted():
    engine = fake_engine(max_batch_size=1)
    traces = Traces()
    engine.observers.append(traces)
    backend = engine.get("m").backend
    backend.gate = asyncio.Event()
    queue = engine.admission.queue(engine.get("m").config)
    first = asyncio.ensure_future(_consume(engine, _request(0)))
    await _until(lambda: backend.calls == 1)
    waiting = asyncio.ensure_future(_consume(engine, _request(1)))
    await _until(lambda: queue.pending == 1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert queue.pending == 0
    backend.gate.set()
    await first
    assert _labels(backend.seen) == ["r0"]
    by_id = {_labels([t.request.id])[0]: t for t in traces.seen}
    assert by_id["r1"].cancelled and not by_id["r1"].succeeded and by_id["r0"].succeeded
    assert queue.used == 0


async def test_retry_after_is_the_time_the_queue_needs_to_drain_one_place():
    engine = fake_engine(max_batch_size=2, max_queue_size=1)
    queue = engine.admission.queue(engine.get("m").config)
    assert queue.retry_after == 1.0                          # nothing measured yet
    now = [0.0]
    queue.clock = lambda: now[0]

    async def hold(i: int, seconds: float, release: asyncio.Event | None = None) -> None:
        request = _request(i)
        async with queue.slot(request, Trace(request, "1")):
            if release is not None:
                await release.wait()
            now[0] += seconds

    await hold(0, 10.0)
    assert queue.retry_after == 5.0                          # 1 place x 10 s / 2 slots
    release = asyncio.Event()
    held = [asyncio.ensure_future(hold(i, 10.0, release)) for i in (1, 2, 3)]   # 2 hold the slots, 1 waits
    await _until(lambda: queue.pending == 1)
    with pytest.raises(Overloaded) as refused:
        async with queue.slot(_request(4), Trace(_request(4), "1")):
            pass
    assert refused.value.retry_after == 10.0                 # 2 places x 10 s / 2 slots
    release.set()
    await asyncio.gather(*held)
    for i in range(20):
        await hold(10 + i, 1000.0)
    assert queue.retry_after == queue.RETRY_AFTER_MAX


@pytest.fixture(scope="module")
def flood_server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 8}})
    server = start_server(["--model-repository", str(root), "--max-queue-size", "32"], root)
    yield server
    server.stop()


async def _flood(server, order: list[int]) -> tuple[list[httpx.Response], str]:
    limits = httpx.Limits(max_connections=250, max_keepalive_connections=250)
    async with httpx.AsyncClient(base_url=server.v1, timeout=120, limits=limits) as client:
        async def one(i: int) -> httpx.Response:
            r = await client.post("/completions", json={"model": "tiny", "prompt": f"flood {i}", "max_tokens": 4,
                                                        "temperature": 1.0})
            order.append(r.status_code)
            return r

        responses = await asyncio.gather(*(one(i) for i in range(200)))
        return responses, (await client.get(server.url + "/metrics")).text


def test_flood_gets_fast_503s_and_loses_nothing(flood_server):
    # The clients run in an event loop of their own, not the session's that earlier async tests shared.
    order: list[int] = []
    responses, metrics = asyncio.run(_flood(flood_server, order))
    codes = [r.status_code for r in responses]
    assert set(codes) <= {200, 503} and len(codes) == 200
    ok, refused = codes.count(200), codes.count(503)
    assert refused > 0
    assert ok >= 8 + 32                              # a refusal means 8 running and 32 queued, all served
    for r in responses:
        if r.status_code == 503:
            assert int(r.headers["retry-after"]) >= 1
            assert r.json()["error"]["code"] == "overloaded"
        else:
            assert r.json()["choices"][0]["finish_reason"] == "length"
    assert order.index(503) < len(order) - 1 - order[::-1].index(200)   # refusals did not wait for the queue
    families = {f.name: f for f in text_string_to_metric_families(metrics)}
    failures = {s.labels["reason"]: s.value for s in families["nv_inference_request_failure"].samples}
    assert failures["REJECTED"] == refused
    assert {s.value for s in families["nv_inference_request_success"].samples} == {ok}
    assert {s.value for s in families["nv_inference_pending_request_count"].samples} == {0}
