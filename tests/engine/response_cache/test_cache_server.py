"""The response cache through a real server and a real redis-server: streamed and non-streamed hits and
misses return identical content, parameters never collide, opt-outs bypass, and killing Redis mid-run
leaves every request served."""
from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import start_server, write_repository


@pytest.fixture(scope="module")
def server(tmp_path_factory, redis_server):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 8}})
    s = start_server(["--model-repository", str(root), "--response-cache", redis_server.url], root)
    yield s
    s.stop()


async def _counters(client) -> dict[str, float]:
    out = {}
    for family in text_string_to_metric_families((await client.get("/metrics")).text):
        for s in family.samples:
            if s.labels.get("model") == "tiny" or family.name == "conch_response_cache_errors":
                out[family.name] = out.get(family.name, 0) + s.value
    return out


async def _chat(client, stream: bool, headers=None, **extra) -> tuple[str, str]:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "cache me"}], "max_tokens": 8,
            "temperature": 0, "stream": stream, "logprobs": True, "top_logprobs": 2, **extra}
    if not stream:
        r = await client.post("/v1/chat/completions", json=body, headers=headers)
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        return choice["message"]["content"], json.dumps(choice["logprobs"]["content"])
    text, logprobs = "", []
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                choice = json.loads(line[6:])["choices"][0]
                text += choice["delta"].get("content") or ""
                logprobs += (choice["logprobs"] or {}).get("content") or []
    return text, json.dumps(logprobs)


async def _until_hit(client, request, hits_before: float):
    for _ in range(100):                                   # the store is written in the background
        result = await request()
        if (await _counters(client))["nv_cache_num_hits_per_model"] > hits_before:
            return result
        await asyncio.sleep(0.01)
    raise AssertionError("never a cache hit")


async def test_streamed_and_non_streamed_hits_and_misses_are_identical(server):
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        c0 = await _counters(client)
        miss = await _chat(client, stream=False)
        c1 = await _counters(client)
        assert c1["nv_cache_num_misses_per_model"] == c0["nv_cache_num_misses_per_model"] + 1
        streamed_hit = await _until_hit(client, lambda: _chat(client, stream=True), c1["nv_cache_num_hits_per_model"])
        plain_hit = await _chat(client, stream=False)
        fresh = await _chat(client, stream=True, headers={"Cache-Control": "no-cache"})
    assert miss == streamed_hit == plain_hit == fresh
    assert miss[0]


async def test_completions_streamed_miss_then_hit(server):
    body = {"model": "tiny", "prompt": "stream first", "max_tokens": 8, "temperature": 0.8, "seed": 11}

    async def streamed():
        chunks = []
        async with client.stream("POST", "/v1/completions", json={**body, "stream": True}) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: {"):
                    chunks.append(json.loads(line[6:])["choices"][0]["text"])
        return chunks

    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        c0 = await _counters(client)
        miss_chunks = await streamed()
        hit_chunks = await _until_hit(client, streamed, c0["nv_cache_num_hits_per_model"])
        plain = (await client.post("/v1/completions", json=body)).json()["choices"][0]["text"]
    assert miss_chunks == hit_chunks and "".join(miss_chunks) == plain


async def test_parameters_never_collide_and_opt_outs_bypass(server):
    base = {"model": "tiny", "prompt": "collide?", "max_tokens": 6, "temperature": 0}
    variants = [{}, {"max_tokens": 5}, {"seed": 3, "temperature": 1.0}, {"seed": 4, "temperature": 1.0},
                {"logit_bias": {"13": 100}}, {"stop": ["x"]}, {"n": 2}, {"prompt": "collide!"}]
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        first = [(await client.post("/v1/completions", json={**base, **v})).json()["choices"] for v in variants]
        c0 = await _counters(client)
        for _ in range(20):                     # let the background writes land, then every one is a hit
            c = await _counters(client)
            again = [(await client.post("/v1/completions", json={**base, **v})).json()["choices"] for v in variants]
            hits = (await _counters(client))["nv_cache_num_hits_per_model"] - c["nv_cache_num_hits_per_model"]
            if hits == len(variants):
                break
        assert again == first
        assert first[4][0]["text"] != first[0][0]["text"]          # the bias changed the output: its own entry
        c1 = await _counters(client)
        await client.post("/v1/completions", json={**base, "cache": False})
        await client.post("/v1/completions", json={**base, "temperature": 1.0})       # not deterministic
        c2 = await _counters(client)
    assert c0["nv_cache_num_misses_per_model"] >= len(variants)
    assert c2["nv_cache_num_hits_per_model"] == c1["nv_cache_num_hits_per_model"]
    assert c2["nv_cache_num_misses_per_model"] == c1["nv_cache_num_misses_per_model"]


async def test_redis_killed_mid_run_leaves_every_request_served(server, redis_server):
    body = {"model": "tiny", "prompt": "survive", "max_tokens": 4, "temperature": 0}
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        expected = (await client.post("/v1/completions", json=body)).json()["choices"][0]["text"]
        redis_server.stop()
        results = await asyncio.gather(*(client.post("/v1/completions", json={**body, "stream": s})
                                         for s in (False, True) * 5))
        assert [r.status_code for r in results] == [200] * 10
        assert all(r.json()["choices"][0]["text"] == expected for r in results if not r.headers[
            "content-type"].startswith("text/event-stream"))
        errors = (await _counters(client))["conch_response_cache_errors"]
        assert errors >= 1
        redis_server.restart()
        c0 = await _counters(client)
        for _ in range(300):                     # the store reconnects after its short break
            r = await client.post("/v1/completions", json=body)
            assert r.status_code == 200 and r.json()["choices"][0]["text"] == expected
            if (await _counters(client))["nv_cache_num_hits_per_model"] > c0["nv_cache_num_hits_per_model"]:
                break
            await asyncio.sleep(0.02)
        assert (await _counters(client))["nv_cache_num_hits_per_model"] > c0["nv_cache_num_hits_per_model"]
    log = server.log.read_text()
    assert log.count("serving without it until it answers") == 1 and "is back" in log
