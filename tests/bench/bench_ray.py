"""Conch on Ray Serve: the Ray hop's cost (issue 19) and session affinity (issue 33).

CONCH_BENCH_RAY_PART=hop|affinity runs one part (default both).

Hop: Conch through the Ray Serve ingress vs the same Conch served directly, same run.

Both serve the same model (SmolLM2 float32 by default; CONCH_BENCH_RAY_MODEL=tiny for the tiny random one),
with one model replica behind one ingress on Ray, so the ratio is the cost of the Ray hop (proxy -> ingress
-> model replica, every delta a streamed Ray object). Load: streamed completions of NEW_TOKENS tokens
(ignore_eos) at concurrency 16. Rounds alternate direct/ray (the order flipping each round); each figure is
the median over rounds, the ratios the median of the rounds' ratios. RSS of every Ray replica process and of
the direct server is read with psutil. Goal: Ray >= 0.9x of direct tokens/s at c16.

Affinity: 16 concurrent agent sessions of 4 turns (each a ~850-token conversation growing by a few tokens a
turn, tests/ray_helpers.py `agent_sessions`) on two model replicas, routed by session affinity
(`--ray-routing affinity`), each replica in turn (`round-robin`, the issue's baseline) or by Ray's default
power-of-two least-loaded choice (`pow2`); the last two are blind to the KV. CONCH_BENCH_RAY_ROUTINGS picks
them (default all three). Each round starts a fresh application (cold caches); rounds reverse the order.
Figures over the later turns: cached_tokens / prompt_tokens and TTFT p50. Goals: ratio >= 0.9 with affinity;
its TTFT p50 <= 0.6x round-robin's.
"""
from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import psutil

from tests.conftest import start_server, write_repository
from tests.ray_helpers import Turn, agent_sessions, cached_ratio, start_ray_head, start_ray_server, stop_ray_server

CONCURRENCY = 16
REQUESTS = 48
NEW_TOKENS = 32
ROUNDS = int(os.environ.get("CONCH_BENCH_RAY_ROUNDS", "4"))


async def _load(url: str) -> dict[str, float]:
    """requests/s, tokens/s and the median time to the first token of REQUESTS streams at CONCURRENCY."""
    body = {"model": "m", "max_tokens": NEW_TOKENS, "ignore_eos": True, "stream": True, "temperature": 1.0}
    sem, ttfts, tokens = asyncio.Semaphore(CONCURRENCY), [], [0]
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=CONCURRENCY * 2)) as client:
        async def one(i: int) -> None:
            async with sem:
                start, first = time.perf_counter(), None
                async with client.stream("POST", url + "/v1/completions",
                                         json={**body, "prompt": f"Tell me about the sea, {i}"}) as r:
                    r.raise_for_status()
                    async for line in r.aiter_lines():
                        if line.startswith("data: {") and '"text":""' not in line:
                            first = first or time.perf_counter()
                            tokens[0] += 1
                ttfts.append(first - start)

        await asyncio.gather(*(one(i) for i in range(CONCURRENCY)))          # warm up
        ttfts.clear()
        tokens[0] = 0
        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(REQUESTS)))
        wall = time.perf_counter() - start
    return {"req/s": REQUESTS / wall, "tok/s": tokens[0] / wall, "ttft ms": statistics.median(ttfts) * 1e3}


def _rss_gb(pattern: str) -> list[float]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if any(pattern in part for part in p.info["cmdline"] or ()):
            found.append(p.memory_info().rss / 1e9)
    return found


def main() -> None:
    weights = "builtin:tiny" if os.environ.get("CONCH_BENCH_RAY_MODEL") == "tiny" else "builtin:smollm2"
    part = os.environ.get("CONCH_BENCH_RAY_PART")
    if part in (None, "hop"):
        hop(weights)
    if part in (None, "affinity"):
        affinity(weights)


def hop(weights: str) -> None:
    with tempfile.TemporaryDirectory(prefix="conch-bench-ray-") as tmp:
        root = write_repository(Path(tmp), {"m": {"weights": weights, "dtype": "float32",
                                                  "max_batch_size": CONCURRENCY}})
        head = start_ray_head(Path(tmp), num_cpus=4)
        direct = ray = None
        try:
            direct = start_server(["--model-repository", str(root)], Path(tmp))
            ray = start_ray_server(head, ["--model-repository", str(root), "--replicas", "1"], Path(tmp))
            figures: dict[str, list[dict[str, float]]] = {"direct": [], "ray": []}
            for i in range(ROUNDS):
                for side in (("direct", "ray") if i % 2 == 0 else ("ray", "direct")):
                    figures[side].append(asyncio.run(_load((direct if side == "direct" else ray).url)))
                    row = "  ".join(f"{k} {v:.1f}" for k, v in figures[side][-1].items())
                    print(f"  round {i + 1} {side:6} {row}", flush=True)
            rss = {"direct server": [psutil.Process(direct.process.pid).memory_info().rss / 1e9],
                   "ray model replica": _rss_gb("ServeReplica:conch:model-m"),
                   "ray ingress replica": _rss_gb("ServeReplica:conch:ingress")}
        finally:
            for server in (direct, ray):
                if server is not None:
                    (stop_ray_server if server is ray else type(server).stop)(server)
            head.stop()
    _report(weights, figures, rss)


def _report(weights: str, figures: dict[str, list[dict[str, float]]], rss: dict[str, list[float]]) -> None:
    print(f"Ray Serve ingress vs direct, {weights}, {REQUESTS} streamed completions of {NEW_TOKENS} tokens at "
          f"concurrency {CONCURRENCY}, {ROUNDS} alternating rounds (medians)")
    for key in ("req/s", "tok/s", "ttft ms"):
        d = statistics.median(f[key] for f in figures["direct"])
        r = statistics.median(f[key] for f in figures["ray"])
        ratio = statistics.median(b[key] / a[key] for a, b in zip(figures["direct"], figures["ray"], strict=True))
        print(f"  {key:8} direct {d:9.1f}   ray {r:9.1f}   ray/direct {ratio:.3f}x")
    tok = statistics.median(b["tok/s"] / a["tok/s"] for a, b in zip(figures["direct"], figures["ray"], strict=True))
    print(f"  goal: ray >= 0.9x of direct tokens/s: {'met' if tok >= 0.9 else 'NOT met'} ({tok:.3f}x)")
    for label, values in rss.items():
        print(f"  RSS {label:20} {' '.join(f'{v:.2f}' for v in values) or 'not found'} GB")


if __name__ == "__main__":
    main()


def affinity(weights: str) -> None:
    rounds = int(os.environ.get("CONCH_BENCH_RAY_AFFINITY_ROUNDS", "2"))
    routings = os.environ.get("CONCH_BENCH_RAY_ROUTINGS", "round-robin,pow2,affinity").split(",")
    runs: dict[str, list[list[Turn]]] = {routing: [] for routing in routings}
    with tempfile.TemporaryDirectory(prefix="conch-bench-ray-affinity-") as tmp:
        # the prefix cache holds a replica's 8 sessions (SmolLM2 float32: 39 MB an 850-token prompt; docs/ray.md)
        root = write_repository(Path(tmp), {"m": {"weights": weights, "dtype": "float32", "max_batch_size": 16,
                                                  "prefix_cache_mb": 1024}})
        head = start_ray_head(Path(tmp), num_cpus=4)
        try:
            for i in range(rounds):
                for routing in (routings if i % 2 == 0 else routings[::-1]):
                    server = start_ray_server(head, ["--model-repository", str(root), "--replicas", "2",
                                                     "--ray-routing", routing], Path(tmp))
                    try:
                        runs[routing].append(asyncio.run(agent_sessions(server.url, "m")))
                    finally:
                        stop_ray_server(server)
                    run = runs[routing][-1]
                    later = [t.ttft_s for t in run if t.turn > 0]
                    homes = sorted(Counter(t.replica for t in run if t.turn == 0).values())
                    # agent_sessions lists each session's turns in order: run[j - 1] is turn j's previous turn
                    moved = sum(t.replica != run[j - 1].replica for j, t in enumerate(run) if t.turn > 0)
                    by_turn = " / ".join(f"{statistics.median(t.ttft_s for t in run if t.turn == n) * 1e3:.0f}"
                                         for n in range(1 + max(t.turn for t in run)))
                    print(f"  round {i + 1} {routing:11} cached {cached_ratio(run):.3f}  later-turn TTFT p50 "
                          f"{statistics.median(later) * 1e3:.0f} ms  (TTFT p50 by turn {by_turn} ms; first turns "
                          f"per replica {homes}; later turns moved off the turn before's replica: {moved})",
                          flush=True)
        finally:
            head.stop()
    _report_affinity(weights, runs)


def _report_affinity(weights: str, runs: dict[str, list[list[Turn]]]) -> None:
    print(f"Session affinity on two Ray replicas, {weights}: 16 sessions x 4 turns, "
          f"{len(next(iter(runs.values())))} rounds each (later turns, medians over rounds)")
    ttft = {k: statistics.median(statistics.median(t.ttft_s for t in run if t.turn > 0) for run in v)
            for k, v in runs.items()}
    ratio = {k: statistics.median(cached_ratio(run) for run in v) for k, v in runs.items()}
    for k in runs:
        print(f"  {k:11} cached/prompt {ratio[k]:.3f}   TTFT p50 {ttft[k] * 1e3:7.0f} ms")
    if "affinity" not in runs:
        return
    print(f"  goal: affinity cached/prompt >= 0.9: {'met' if ratio['affinity'] >= 0.9 else 'NOT met'}")
    for baseline in (k for k in runs if k != "affinity"):
        speed = ttft["affinity"] / ttft[baseline]
        goal = f" (goal <= 0.6x: {'met' if speed <= 0.6 else 'NOT met'})" if baseline == "round-robin" else ""
        print(f"  affinity TTFT p50 / {baseline}'s: {speed:.2f}x{goal}")
