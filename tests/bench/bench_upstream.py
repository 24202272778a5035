"""Issue 17's figures: the gateway's overhead in front of an upstream, measured in the same run.

An echo upstream (tests/fake_upstreams.py: a starlette app under uvicorn, in a process of its own) answers
every chat completion at once with a fixed text. The same load (chat completions at concurrency 32, plain and
streamed) goes to it directly and to a Conch in front of it (a model with `backend: openai`). Figures:
requests/s of each, and latency p50/p99 with what Conch adds (front minus direct). Rounds alternate
direct/front (the order flipping each round) and medians are reported, so that background load on a shared
machine hits both sides alike. Goals (the issue): added p50 <= 1 ms, front req/s >= 0.5x of direct.
"""
from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.conftest import free_port, start_server, write_repository

CONCURRENCY = 32
REQUESTS = 640
ROUNDS = 4
BODY = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16}


def _start_echo(tmp: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = (tmp / "echo.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "tests.fake_upstreams", str(port)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(200):
        try:
            httpx.post(f"{url}/chat/completions", json={"model": "echo", **BODY}, timeout=2)
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the echo upstream did not start")


async def _one(client: httpx.AsyncClient, url: str, body: dict) -> float:
    start = time.perf_counter()
    if body.get("stream"):
        async with client.stream("POST", url, json=body) as r:
            r.raise_for_status()
            async for _ in r.aiter_lines():
                pass
    else:
        r = await client.post(url, json=body)
        r.raise_for_status()
    return time.perf_counter() - start


async def _load(url: str, model: str, stream: bool) -> tuple[float, list[float]]:
    """(requests/s, latencies) of REQUESTS chat completions at CONCURRENCY."""
    body = {"model": model, **BODY, "stream": stream, "temperature": 1.0}
    sem = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=CONCURRENCY)) as client:
        async def one() -> float:
            async with sem:
                return await _one(client, f"{url}/v1/chat/completions", body)

        await asyncio.gather(*(one() for _ in range(CONCURRENCY * 2)))          # warm up
        start = time.perf_counter()
        latencies = await asyncio.gather(*(one() for _ in range(REQUESTS)))
        return REQUESTS / (time.perf_counter() - start), list(latencies)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _measure(direct: str, front: str, stream: bool) -> dict:
    sides = {"direct": (direct, "echo"), "front": (front, "echo")}
    runs: dict[str, list] = {"direct": [], "front": []}
    for i in range(ROUNDS):
        for side in (("direct", "front") if i % 2 == 0 else ("front", "direct")):
            runs[side].append(asyncio.run(_load(*sides[side], stream)))
    out = {}
    for side, results in runs.items():
        out[side] = {"rps": statistics.median(r for r, _ in results),
                     "p50": statistics.median(_pct(lat, 0.5) for _, lat in results),
                     "p99": statistics.median(_pct(lat, 0.99) for _, lat in results)}
    return out


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="conch-bench-upstream-") as tmp:
        tmp = Path(tmp)
        echo, url = _start_echo(tmp)
        repo = write_repository(tmp / "repo", {"echo": {"backend": "openai", "base_url": url, "upstream_model": "echo",
                                                        "max_concurrency": CONCURRENCY * 2, "timeout": 60}})
        front = start_server(["--model-repository", str(repo), "--log-level", "warning"], tmp)
        try:
            rows = [(label, _measure(url.removesuffix("/v1"), front.url, stream))
                    for label, stream in (("plain", False), ("streamed", True))]
        finally:
            front.stop()
            echo.kill()
    print(f"gateway in front of an echo upstream: chat completions at c{CONCURRENCY}, {REQUESTS} requests, "
          f"medians of {ROUNDS} alternating rounds")
    print(f"  {'':9} {'direct req/s':>12} {'front req/s':>12} {'ratio':>6} {'p50 direct':>10} {'p50 front':>10} "
          f"{'added p50':>10} {'p99 direct':>10} {'p99 front':>10} {'added p99':>10}")
    for label, m in rows:
        d, f = m["direct"], m["front"]
        print(f"  {label:9} {d['rps']:12.1f} {f['rps']:12.1f} {f['rps'] / d['rps']:6.2f} "
              f"{d['p50'] * 1e3:8.2f}ms {f['p50'] * 1e3:8.2f}ms {(f['p50'] - d['p50']) * 1e3:8.2f}ms "
              f"{d['p99'] * 1e3:8.2f}ms {f['p99'] * 1e3:8.2f}ms {(f['p99'] - d['p99']) * 1e3:8.2f}ms")


if __name__ == "__main__":
    main()
