"""The Redis store against a real redis-server: values, TTL, and a server that dies and comes back."""
from __future__ import annotations

import asyncio
import logging

import pytest

from conch.engine.response_cache import ResponseCache
from conch.engine.response_cache.redis_store import RedisStore
from conch.engine.types import GenerationRequest, SamplingParams
from tests.serving_helpers import fake_engine, start_redis


@pytest.fixture
def redis_server(tmp_path):
    server = start_redis(tmp_path)
    yield server
    server.stop()


async def test_values_and_ttl(redis_server):
    store = RedisStore(redis_server.url, ttl=100)
    await store.set("k", b"\x00value")
    assert await store.get("k") == b"\x00value"
    assert await store.get("missing") is None
    ttl = await store.link.client.ttl("conch:rc:k")
    assert 0 < ttl <= 100
    assert store.errors == 0
    await store.close()


async def test_redis_down_is_a_miss_logged_once_then_reconnects(redis_server, caplog):
    store = RedisStore(redis_server.url, pause=0.05)
    engine = fake_engine(cache=ResponseCache(store))
    request = GenerationRequest(id="a", model="m", prompt="hi", params=SamplingParams(max_tokens=3, temperature=0))

    def run():
        return _collect(engine, request)

    await run()
    await engine.cache.flush()
    await run()
    assert engine.get("m").backend.calls == 1                    # a hit
    redis_server.stop()
    with caplog.at_level(logging.WARNING, logger="conch.engine.response_cache.redis_store"):
        for _ in range(5):
            assert len(await run()) == 3                          # served, from the backend
            await engine.cache.flush()
    assert engine.get("m").backend.calls == 6
    assert store.errors >= 1
    assert len([r for r in caplog.records if "failed" in r.getMessage()]) == 1
    redis_server.restart()
    for _ in range(200):                                          # the break ends; the pool reconnects
        await run()
        await engine.cache.flush()
        if store.link.up and engine.cache.hits["m"] > 1:
            break
        await asyncio.sleep(0.02)
    assert store.link.up and engine.cache.hits["m"] > 1
    await store.close()


async def _collect(engine, request):
    return [d async for d in engine.generate(request)]
