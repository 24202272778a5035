"""Token buckets, the same cases in memory and in Redis; Redis down falls back (per-process share, open or
closed); two gateway processes that share one Redis enforce one limit."""
from __future__ import annotations


import httpx
import pytest

from conch.gateway.limits.bucket import MemoryBuckets, decide, refill
from conch.gateway.limits import LimiterUnavailable
from conch.gateway.limits.fallback import Fallback
from conch.gateway.limits.redis_buckets import RedisBuckets
from tests.conftest import start_server, write_repository
from tests.serving_helpers import start_redis


def test_bucket_math():
    assert refill(0, 10, 0.5, 3) == 3 and refill(1, 1, 0.5, 3) == 1.5 and refill(1, -5, 1, 3) == 1
    ok, level = decide(1.0, 1, 1, 0.5, 3)
    assert ok.allowed and level == 0
    refused, level = decide(0.25, 1, 1, 0.5, 3)
    assert not refused.allowed and refused.retry_after == 1.5 and level == 0.25
    debt, level = decide(1.0, 100, -1e18, 1, 3)
    assert debt.allowed and level == -3                      # debt is bounded by the capacity


@pytest.fixture(params=["memory", "redis"])
def buckets(request, redis_server):
    b = MemoryBuckets() if request.param == "memory" else RedisBuckets(redis_server.url, prefix=f"t{id(request)}:")
    yield b


async def test_capacity_then_refusal_with_a_wait(buckets):
    results = [await buckets.take("k", 3, 0.01, 1, 1) for _ in range(4)]
    assert [r.allowed for r in results] == [True, True, True, False]
    assert 50 < results[-1].retry_after <= 100                # one token at 0.01/s
    assert (await buckets.take("other", 3, 0.01, 1, 1)).allowed
    assert (await buckets.take("k", 3, 0.01, 10, -1e18)).allowed       # a debit always goes through
    assert not (await buckets.take("k", 3, 0.01, 0, 1)).allowed
    await buckets.close()


async def test_redis_down_falls_back_to_this_process_s_share_then_redis_decides_again(tmp_path):
    server = start_redis(tmp_path)
    try:
        b = RedisBuckets(server.url, fallback=Fallback("local", replicas=2))
        assert (await b.take("k", 4, 0.001, 1, 1)).allowed and not b.fallback.active
        server.stop()
        local = [(await b.take("k", 4, 0.001, 1, 1)).allowed for _ in range(4)]
        assert local == [True, True, False, False]                   # half of 4, as one of two replicas
        assert b.errors >= 1 and b.fallback.active and b.fallback.decisions == 4
        server.restart()
        b.link._down_until = 0.0                                     # skip the pause between retries
        assert (await b.take("k", 4, 0.001, 1, 1)).allowed and not b.fallback.active
        await b.close()
    finally:
        server.stop()                                    # the restarted redis-server too (it outlived the run)


async def test_the_fallback_modes_with_redis_unreachable():
    dead = "redis://127.0.0.1:1/0"
    opened = RedisBuckets(dead, fallback=Fallback("open"))
    assert all([(await opened.take("k", 1, 0.001, 1, 1)).allowed for _ in range(3)])
    closed = RedisBuckets(dead, fallback=Fallback("closed"))
    with pytest.raises(LimiterUnavailable) as refused:
        await closed.take("k", 1, 0.001, 1, 1)
    assert refused.value.status == 503 and refused.value.headers["Retry-After"] == "1"
    assert (await closed.take("k", 1, 0.001, 10, -1e18)).allowed      # usage after the fact is dropped
    with pytest.raises(ValueError):
        Fallback("sometimes")
    for b in (opened, closed):
        await b.close()


@pytest.fixture(scope="module")
def two_gateways(tmp_path_factory, redis_server):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 8}})
    (root / "keys.yaml").write_text("keys:\n  - {key: sk-shared, name: shared, rpm: 5}\n")
    args = ["--model-repository", str(root), "--api-keys-file", str(root / "keys.yaml"),
            "--rate-limits", redis_server.url]
    servers = [start_server(args, root) for _ in range(2)]
    yield servers
    for s in servers:
        s.stop()


async def test_two_processes_share_one_limit(two_gateways):
    headers = {"Authorization": "Bearer sk-shared"}
    body = {"model": "tiny", "prompt": "hi", "max_tokens": 1}
    async with httpx.AsyncClient(timeout=60, headers=headers) as client:
        codes = []
        for i in range(12):                              # alternate between the replicas
            r = await client.post(two_gateways[i % 2].v1 + "/completions", json=body)
            codes.append(r.status_code)
    assert codes.count(200) == 5 and codes.count(429) == 7
    assert codes[:5] == [200] * 5
