"""Prefix caching: a prompt prefilled from a cached head generates exactly what a full prefill does."""
from __future__ import annotations

import asyncio

import pytest
import torch

from conch.engine.backends.conch.backend import ConchBackend
from conch.engine.backends.conch.kv.prefix_cache import BLOCK, PrefixCache
from conch.engine.repository import ModelConfig
from conch.engine.types import GenerationRequest, SamplingParams

HEAD = list(range(1000, 1000 + 5 * BLOCK + 7))          # a long shared head (a system prompt, tools...)


async def _greedy(backend, ids: list[int], rid: str) -> list[int]:
    req = GenerationRequest(id=rid, model="m", prompt_token_ids=tuple(ids),
                            params=SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True))
    return [t async for d in backend.generate(req) for t in d.token_ids]


@pytest.fixture(scope="module")
async def backends():
    cached = ConchBackend(ModelConfig(name="m", weights="builtin:smollm2", dtype="float32"))
    plain = ConchBackend(ModelConfig(name="m", weights="builtin:smollm2", dtype="float32", prefix_cache_mb=0))
    await cached.start()
    await plain.start()
    yield cached, plain
    await cached.stop()
    await plain.stop()


async def test_reused_head_gives_the_same_tokens(backends):
    cached, plain = backends
    first = HEAD + [5, 6, 7]
    second = HEAD + [9, 10, 11, 12, 13]
    assert await _greedy(cached, first, "a") == await _greedy(plain, first, "a2")
    hits = cached.runner.prefixes.hit_tokens
    assert await _greedy(cached, second, "b") == await _greedy(plain, second, "b2")
    assert cached.runner.prefixes.hit_tokens == hits + 5 * BLOCK     # the second prompt really reused the head


async def test_hit_and_miss_prefilled_in_one_step_stay_in_order(backends):
    cached, plain = backends
    prompts = [HEAD + [21, 22], [7, 8, 9], HEAD + [31], [4, 5]]
    together = await asyncio.gather(*[_greedy(cached, p, f"t{i}") for i, p in enumerate(prompts)])
    alone = [await _greedy(plain, p, f"p{i}") for i, p in enumerate(prompts)]
    assert together == alone


async def test_prompts_sent_together_reuse_the_head_the_first_one_computes():
    """Sent together, before any head is cached: the others wait while the first prompt's chunks compute the
    head they share (kv/shared_heads.py), then their first chunk copies all of it from its slot, past the
    cache's last whole block."""
    backend = ConchBackend(ModelConfig(name="m", weights="builtin:tiny", dtype="float32", max_step_tokens=64))
    plain = ConchBackend(ModelConfig(name="m", weights="builtin:tiny", dtype="float32", max_step_tokens=64,
                                            prefix_cache_mb=0))
    await backend.start()
    await plain.start()
    try:
        prompts = [HEAD + [40 + i, 50 + i] for i in range(4)]
        together = await asyncio.gather(*[_greedy(backend, p, f"t{i}") for i, p in enumerate(prompts)])
        assert together == [await _greedy(plain, p, f"p{i}") for i, p in enumerate(prompts)]
        assert backend.runner.prefixes.hit_tokens == 3 * len(HEAD)     # three prompts reused the first one's head
    finally:
        await backend.stop()
        await plain.stop()


async def test_the_next_turn_starts_in_the_slot_the_last_turn_left_and_generates_the_same():
    """bf16 (the unzeroed store of the native kernels): a freed slot keeps its tokens' KV, and a prompt that
    extends them (the conversation's next turn: last prompt + answer + a new message) computes only the rest."""
    cached = ConchBackend(ModelConfig(name="m", weights="builtin:tiny", dtype="bfloat16"))
    plain = ConchBackend(ModelConfig(name="m", weights="builtin:tiny", dtype="bfloat16", prefix_cache_mb=0))
    await cached.start()
    await plain.start()
    try:
        if cached.runner.kv.zeroed:
            pytest.skip("no native attention kernel here: the zeroed store keeps no tokens")
        turn = list(range(300, 360))
        answer = await _greedy(cached, turn, "t1")
        assert answer == await _greedy(plain, turn, "p1")
        following = turn + answer + list(range(400, 410))
        hits = cached.runner.prefixes.hit_tokens
        assert await _greedy(cached, following, "t2") == await _greedy(plain, following, "p2")
        assert cached.runner.prefixes.hit_tokens - hits == len(turn) + len(answer) - 1   # the last answer token
        assert plain.runner.prefixes.hit_tokens == 0                            # was never computed
    finally:
        await cached.stop()
        await plain.stop()


async def test_a_chat_s_next_turn_through_the_server_starts_from_its_last_turn(tmp_path):
    """The openai SDK against a real server: the second turn (the first one's messages, its answer, a new
    question) reuses the slot the first turn left and answers as a model with prefix caching off does."""
    import openai

    from tests.conftest import start_inprocess, write_repository

    config = {"weights": "builtin:smollm2", "dtype": "bfloat16", "response_cache": False}
    server = start_inprocess(write_repository(tmp_path, {"kept": config, "plain": {**config, "prefix_cache_mb": 0}}))
    try:
        runner = server.engine.get("kept").backend.runner
        if runner.kv.zeroed:
            pytest.skip("no native attention kernel here: the zeroed store keeps no tokens")
        async with openai.AsyncOpenAI(base_url=server.v1, api_key="none", max_retries=0) as client:
            async def turns(model: str) -> list[str]:
                messages, answers = [{"role": "user", "content": "Name three colours of the sea."}], []
                for question in ("And of the sky?", "And of a forest at night?"):
                    reply = await client.chat.completions.create(model=model, messages=messages, max_tokens=12,
                                                                 temperature=0)
                    answers.append(reply.choices[0].message.content)
                    messages += [{"role": "assistant", "content": answers[-1]}, {"role": "user", "content": question}]
                return answers

            hits = runner.prefixes.hit_tokens
            assert await turns("kept") == await turns("plain")
            assert runner.prefixes.hit_tokens - hits > 40          # the later turn started past its last turn
    finally:
        server.stop()


async def test_chats_sent_together_through_the_server_compute_their_shared_head_once(tmp_path):
    """The openai SDK at its defaults against a real server: six chats sent at once share the chat template's
    system prompt; one computes it, the others copy it (kv/shared_heads.py) and say so in their usage's
    cached_tokens, and every reply is what a model with prefix caching off gives (whole and streamed)."""
    import asyncio

    import openai

    from tests.conftest import start_inprocess, write_repository

    config = {"weights": "builtin:smollm2", "dtype": "bfloat16", "response_cache": False}
    server = start_inprocess(write_repository(tmp_path, {"kept": config, "plain": {**config, "prefix_cache_mb": 0}}))
    questions = [f"Name {n} colours of the sea." for n in ("two", "three", "four", "five", "six", "seven")]
    try:
        runner = server.engine.get("kept").backend.runner
        async with openai.AsyncOpenAI(base_url=server.v1, api_key="none") as client:
            async def ask(model: str, question: str):
                return await client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": question}], max_tokens=8, temperature=0)

            async def streamed(model: str, question: str) -> str:
                stream = await client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": question}], max_tokens=8, temperature=0,
                    stream=True)
                return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

            plain = [(await ask("plain", q)).choices[0].message.content for q in questions]
            hits = runner.prefixes.hit_tokens
            together = await asyncio.gather(*[ask("kept", q) for q in questions])
            assert [r.choices[0].message.content for r in together] == plain
            cached = [r.usage.prompt_tokens_details.cached_tokens for r in together]
            assert sum(c >= 16 for c in cached) >= 5, cached               # all but the one that computed it
            assert runner.prefixes.hit_tokens - hits >= sum(cached)
            assert await asyncio.gather(*[streamed("kept", q) for q in questions]) == plain
    finally:
        server.stop()


def test_a_longer_head_of_the_same_prompt_replaces_the_shorter():
    layer = (torch.zeros(1, 1, 6 * BLOCK, 2), torch.zeros(1, 1, 6 * BLOCK, 2))
    cache = PrefixCache(budget_bytes=1 << 30, min_tokens=BLOCK)
    ids = list(range(6 * BLOCK))
    cache.store(ids[:2 * BLOCK], [layer])
    cache.store(ids, [layer])                              # the next chunk's head: subsumes the first entry
    assert len(cache._entries) == 1 and cache.nbytes == 2 * 6 * BLOCK * 2 * 4
    hit = cache.lookup(ids[:2 * BLOCK] + [1])
    assert hit is not None and hit[0] == 2 * BLOCK         # the shorter head is still found, in the longer entry


def test_budget_evicts_least_recently_used():
    layer = (torch.zeros(1, 1, 4 * BLOCK, 2), torch.zeros(1, 1, 4 * BLOCK, 2))
    one_entry = 2 * layer[0].nbytes
    cache = PrefixCache(budget_bytes=one_entry, min_tokens=BLOCK)
    a, b = list(range(4 * BLOCK)), list(range(1, 4 * BLOCK + 1))
    cache.store(a, [layer])
    cache.store(b, [layer])
    assert cache.lookup(a + [1]) is None and cache.lookup(b + [1]) is not None
    assert cache.nbytes == one_entry


def test_short_prompts_are_not_stored():
    cache = PrefixCache(budget_bytes=1 << 30)
    assert not cache.wants(list(range(BLOCK)))
    assert cache.wants(list(range(4 * BLOCK)))
