"""Conformance: streaming, concurrency, the declared roles and stats, health and stop."""
from __future__ import annotations

import asyncio
from contextlib import aclosing

from conch.engine.backend import BackendStats, LLMBackend, TensorModel, TextGenerator
from tests.engine.backends.conformance.backends import MODEL
from tests.engine.backends.conformance.drive import chat, one, request, run, settled


async def test_streamed_deltas_concatenate_to_the_whole_text(engine):
    whole = await one(engine, max_tokens=20)
    streamed = await one(engine, max_tokens=20, stream=True)
    assert streamed.text == whole.text and streamed.token_ids == whole.token_ids
    assert streamed.deltas > 1


async def test_concurrent_requests_each_get_their_own_answer(engine):
    prompts = [chat(f"Count from {i} to {i + 20}.") for i in range(8)]
    choices = await asyncio.gather(*(run(engine, request(p, rid=f"c{i}", max_tokens=8 + i, ignore_eos=True))
                                     for i, p in enumerate(prompts)))
    assert [c.usage.completion_tokens for (c,) in choices] == [8 + i for i in range(8)]
    assert all(c.finish_reason == "length" for (c,) in choices)
    assert await settled(engine) == (0, 0)


async def test_the_backend_declares_the_llm_role_and_reports_stats(engine):
    backend = engine.get(MODEL).backend
    assert isinstance(backend, TextGenerator) and isinstance(backend, LLMBackend)
    assert not isinstance(backend, TensorModel)      # /v2 reaches it through Triton's LLM contract
    idle = backend.stats()
    assert isinstance(idle, BackendStats) and idle.running == 0 and idle.waiting == 0
    async with aclosing(engine.generate(request(max_tokens=64, ignore_eos=True, stream=True))) as deltas:
        async for _ in deltas:
            busy = backend.stats()
            break
    assert busy.running == 1
    assert busy.kv_cache_usage is None or 0.0 < busy.kv_cache_usage <= 1.0
    assert busy.prefix_cache_hits <= busy.prefix_cache_queries
    assert await settled(engine) == (0, 0)


async def test_health_then_stop(engine):
    """Last in the module: it stops the backend the other tests share."""
    backend = engine.get(MODEL).backend
    assert backend.health()
    await engine.unload(MODEL)
    assert not backend.health()
