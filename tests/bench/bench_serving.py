"""Issue 5's figures, printed as ratios measured in the same run.

1. Response cache: latency of a hit vs a miss of 64 new tokens (greedy, ignore_eos) for one request through
   HTTP, with the memory store and the Redis store side by side (goal: a hit <= 2% of a miss).
2. Gateway alone: ms per request in process over a fake backend, keys+limits+metrics on vs off (what the
   feature costs, without the model or the machine's other load).
3. Gateway overhead: requests/s of short completions at concurrency 16 with API keys, rate limits (large
   enough never to refuse) and metrics on, vs all three off (goal: >= 0.95x). Rounds run off/on pairs
   back to back (the order flipping each round) and the median of the pairs' ratios is reported, so that
   background load on a shared machine hits both sides of a pair alike.

Model: SmolLM2 (float32) for the cache figures, the tiny random model for the overhead figures; set
CONCH_BENCH_CACHE_MODEL=tiny for a quick run.
"""
from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from tests.conftest import start_server, write_repository
from tests.serving_helpers import start_redis

NEW_TOKENS = 64
HITS = 20
OVERHEAD_REQUESTS = 96
CONCURRENCY = 16
ROUNDS = 6
KEY = "sk-bench"


def _repo(root: Path, weights: str) -> Path:
    return write_repository(root, {"m": {"weights": weights, "dtype": "float32", "max_batch_size": 16}})


async def _latency(url: str, body: dict) -> float:
    async with httpx.AsyncClient(timeout=600) as client:
        start = time.perf_counter()
        r = await client.post(url + "/v1/completions", json=body)
        r.raise_for_status()
        return time.perf_counter() - start


async def _cache_figures(url: str) -> tuple[float, float]:
    body = {"model": "m", "prompt": "Write a short story about a lighthouse keeper.", "max_tokens": NEW_TOKENS,
            "temperature": 0, "ignore_eos": True}
    await _latency(url, {**body, "prompt": "warm up", "max_tokens": 4, "cache": False})
    miss = await _latency(url, body)
    await asyncio.sleep(0.2)                              # the store is written in the background
    hits = [await _latency(url, body) for _ in range(HITS)]
    return miss, statistics.median(hits)


async def _throughput(url: str, headers: dict) -> float:
    body = {"model": "m", "prompt": "hello there", "max_tokens": 8, "temperature": 1.0, "ignore_eos": True}
    sem = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(timeout=600, headers=headers,
                                 limits=httpx.Limits(max_connections=CONCURRENCY * 2)) as client:
        async def one(i: int) -> None:
            async with sem:
                r = await client.post(url + "/v1/completions", json={**body, "prompt": f"hello {i}"})
                r.raise_for_status()

        await asyncio.gather(*(one(i) for i in range(CONCURRENCY)))          # warm up
        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(OVERHEAD_REQUESTS)))
        return OVERHEAD_REQUESTS / (time.perf_counter() - start)


def cache_bench(tmp: Path) -> None:
    weights = "builtin:tiny" if os.environ.get("CONCH_BENCH_CACHE_MODEL") == "tiny" else "builtin:smollm2"
    redis = start_redis(tmp)
    repo = _repo(tmp / "repo-cache", weights)
    rows = []
    try:
        for label, store in (("memory", "memory"), ("redis", redis.url)):
            server = start_server(["--model-repository", str(repo), "--response-cache", store], tmp)
            try:
                miss, hit = asyncio.run(_cache_figures(server.url))
            finally:
                server.stop()
            rows.append((label, miss, hit))
    finally:
        redis.stop()
    print(f"response cache, {weights}, {NEW_TOKENS} new tokens, one request over HTTP (median of {HITS} hits)")
    print(f"  {'store':8} {'miss ms':>10} {'hit ms':>10} {'hit/miss':>10}   goal <= 0.02")
    for label, miss, hit in rows:
        print(f"  {label:8} {miss * 1e3:10.1f} {hit * 1e3:10.2f} {hit / miss:10.4f}   "
              f"{'met' if hit / miss <= 0.02 else 'NOT met'}")


def overhead_bench(tmp: Path) -> None:
    repo = _repo(tmp / "repo-overhead", "builtin:tiny")
    keys = tmp / "keys.yaml"
    keys.write_text(f"keys:\n  - {{key: {KEY}, name: bench, rpm: 1000000000, tpm: 1000000000}}\n")
    off = start_server(["--model-repository", str(repo), "--no-metrics"], tmp)
    on = start_server(["--model-repository", str(repo), "--api-keys-file", str(keys)], tmp)
    ratios, rates = [], {"off": [], "on": []}
    try:
        for i in range(ROUNDS):
            pair = {}
            for side in (("off", "on") if i % 2 == 0 else ("on", "off")):
                server, headers = (off, {}) if side == "off" else (on, {"Authorization": f"Bearer {KEY}"})
                pair[side] = asyncio.run(_throughput(server.url, headers))
                rates[side].append(pair[side])
            ratios.append(pair["on"] / pair["off"])
    finally:
        off.stop()
        on.stop()
    ratio = statistics.median(ratios)
    print(f"gateway overhead, tiny model, {OVERHEAD_REQUESTS} requests of 8 tokens at concurrency {CONCURRENCY}"
          f" ({ROUNDS} off/on pairs)")
    print(f"  keys+limits+metrics off: {statistics.median(rates['off']):8.1f} req/s (median)")
    print(f"  keys+limits+metrics on:  {statistics.median(rates['on']):8.1f} req/s (median)")
    print(f"  on/off, median of pairs: {ratio:.3f}x  (pairs {' '.join(f'{r:.2f}' for r in ratios)})  goal >= 0.95x "
          f"{'met' if ratio >= 0.95 else 'NOT met'}")


async def _inprocess_ms(on: bool, n: int = 400) -> float:
    """Milliseconds per request of the gateway alone: in process over ASGI, a fake backend, 8 tokens."""
    from conch.gateway.app import build_app
    from conch.gateway.auth import ApiKey, Gate, KeyRing
    from conch.gateway.limits import open_limiter
    from tests.serving_helpers import fake_engine

    gate = Gate(KeyRing([ApiKey(KEY, "bench", rpm=10**9, tpm=10**9)]), open_limiter("memory")) if on else None
    app = build_app(fake_engine(), gate=gate, metrics=on)
    headers = {"Authorization": f"Bearer {KEY}"} if on else {}
    body = {"model": "m", "prompt": "hello", "max_tokens": 8}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", headers=headers) as c:
        for _ in range(50):
            await c.post("/v1/completions", json=body)
        start = time.perf_counter()
        for _ in range(n):
            await c.post("/v1/completions", json=body)
        return (time.perf_counter() - start) / n * 1e3


def gateway_only_bench() -> None:
    off = min(asyncio.run(_inprocess_ms(False)) for _ in range(3))
    on = min(asyncio.run(_inprocess_ms(True)) for _ in range(3))
    print("gateway alone (in process, fake backend, 8 tokens, sequential; best of 3)")
    print(f"  off {off:.3f} ms/request, on {on:.3f} ms/request: keys+limits+metrics add {on - off:.3f} ms; "
          f"on/off throughput {off / on:.3f}x of the gateway's own work")


def main() -> None:
    gateway_only_bench()
    with tempfile.TemporaryDirectory(prefix="conch-bench-serving-") as tmp:
        cache_bench(Path(tmp))
        overhead_bench(Path(tmp))


if __name__ == "__main__":
    main()
