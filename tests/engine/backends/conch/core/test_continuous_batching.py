"""Continuous batching through a real server: batched greedy output equals each request run alone, and
clients that drop their streams free their batch slots."""
from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from conch.engine.weights import DEFAULT_MODEL_ID
from conch.engine.types import RequestStatus
from tests.conftest import start_inprocess, write_repository

MODEL = DEFAULT_MODEL_ID
PROMPTS = [
    "Hi", "What is 2 + 2?", "Name three fruits.", "Write a haiku about the autumn moon over a quiet lake.",
    "Translate 'good morning' to French.", "Why is the sky blue? Explain briefly to a child of five years old.",
    "List the planets.", "Tell me a joke about computers and programmers who forget semicolons.", "Say yes.",
    "What is the capital of Japan?", "Describe a cat.", "Give me a synonym for happy.",
    "Explain photosynthesis in one sentence, please, using simple words that anyone can understand.",
    "Count to five.", "What colour is grass?", "Recommend a book about the history of mathematics.",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        MODEL: {"weights": "builtin:smollm2", "dtype": "float32", "max_batch_size": 16}})
    s = start_inprocess(root)
    yield s
    s.stop()


def _backend(server):
    return server.engine.get(MODEL).backend


async def _complete(client: openai.AsyncOpenAI, prompt: str) -> str:
    r = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompt}],
                                             max_tokens=10, temperature=0)
    return r.choices[0].message.content


async def test_sixteen_concurrent_greedy_requests_equal_each_alone(server):
    client = openai.AsyncOpenAI(base_url=server.v1, api_key="none", max_retries=0)
    alone = [await _complete(client, p) for p in PROMPTS]
    steps_before = _backend(server).core.steps
    together = await asyncio.gather(*[_complete(client, p) for p in PROMPTS])
    assert together == alone
    # They really shared batches: far fewer steps than 16 sequential runs of up to 10 tokens.
    assert _backend(server).core.steps - steps_before < 16 * 10 / 2


def _watch(backend) -> list:
    """Records every delta the engine delivers (on the event loop), to see how the dropped requests ended."""
    seen: list = []
    deliver = backend._deliver

    def spy(deltas):
        seen.extend(deltas)
        deliver(deltas)

    backend._deliver = spy
    return seen


async def _until_ended(backend, seen: list, count: int) -> list:
    """The final deltas of `count` requests: the engine sends one per request as it ends (abort or not).
    Waits on the engine's own events, with no time limit of ours (pytest's timeout bounds the test)."""
    while len(finals := [d for d in seen if d.finished]) < count:
        await asyncio.sleep(0.05)
    return finals


async def test_dropped_streams_free_their_slots(server):
    backend = _backend(server)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Write a long story."}],
            "max_tokens": 400, "stream": True, "temperature": 0}

    async def drop_after_three_chunks(http: httpx.AsyncClient) -> None:
        async with http.stream("POST", "/v1/chat/completions", json=body) as r:
            seen = 0
            async for line in r.aiter_lines():
                seen += line.startswith("data:")
                if seen >= 3:
                    return                      # leaving the block closes the connection mid-stream

    seen = _watch(backend)
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
            await asyncio.gather(*[drop_after_three_chunks(http) for _ in range(8)])
        finals = await _until_ended(backend, seen, 8)
    finally:
        del backend._deliver
    # Aborted, not run to their 400 tokens: each got a few tokens, none ended by length.
    assert [d.status for d in finals] == [RequestStatus.FINISHED_ABORTED] * 8
    assert all(d.usage.completion_tokens < 400 for d in finals)
    assert backend.stats().running == 0 and backend.stats().waiting == 0 and not backend.scheduler.running
    client = openai.AsyncOpenAI(base_url=server.v1, api_key="none", max_retries=0)
    assert await _complete(client, "Hi")


async def test_dropped_non_streamed_request_is_aborted(server):
    backend = _backend(server)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Write a long story."}],
            "max_tokens": 400, "temperature": 0}
    seen = _watch(backend)
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=1.5) as http:
            with pytest.raises(httpx.ReadTimeout):
                await http.post("/v1/chat/completions", json=body)
        [final] = await _until_ended(backend, seen, 1)
    finally:
        del backend._deliver
    assert final.status == RequestStatus.FINISHED_ABORTED and final.usage.completion_tokens < 400
    assert backend.stats().running == 0
