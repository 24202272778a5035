"""Issue 15's figures: Conch with its vllm backend vs vLLM's own OpenAI server, same model, same workload,
same run. Run from .venv-vllm (`make bench-vllm`); without vllm it says so and stops.

Workload: 32 chat prompts (bench_engine's) x 64 new tokens, greedy, ignore_eos, streamed over HTTP
(/v1/chat/completions), at concurrency 1 and 16. Both servers load SmolLM2's converted folder with the same
engine args (bf16, max_model_len 2048, max_num_seqs 16, eager mode, 1 GiB of KV cache) and run side by side;
rounds alternate which server goes first, and the figures are the medians over rounds of each side and of
the per-round ratios (goal: Conch >= 0.95x vLLM's tokens/s, TTFT p50 <= 1.1x). CONCH_BENCH_ROUNDS (default 2)
and CONCH_BENCH_PROMPTS (default 32, the first N prompts) shrink the run for an overloaded machine.
"""
from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.bench.bench_engine import NEW_TOKENS, PROMPTS
from tests.conftest import Server, free_port, start_server, wait_ready
from tests.engine.backends.vllm.helpers import ENGINE_ARGS, VLLM_ENV

ROUNDS = int(os.environ.get("CONCH_BENCH_ROUNDS", "2"))
WORKLOAD = PROMPTS[:int(os.environ.get("CONCH_BENCH_PROMPTS", len(PROMPTS)))]
CONCURRENCIES = (1, 16)
MODEL = "m"


async def _run(url: str, concurrency: int) -> tuple[float, float]:
    """(completion tokens/s over the whole run, TTFT p50 in seconds) of the workload at `concurrency`."""
    sem = asyncio.Semaphore(concurrency)
    ttfts: list[float] = []
    tokens = 0

    async def one(client: httpx.AsyncClient, prompt: str) -> None:
        nonlocal tokens
        body = {"model": MODEL, "messages": [{"role": "user", "content": prompt}], "max_tokens": NEW_TOKENS,
                "temperature": 0, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
        async with sem:
            start = time.perf_counter()
            first = None
            async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
                r.raise_for_status()
                async for line in r.aiter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    chunk = json.loads(line[6:])
                    if first is None and any(c["delta"].get("content") for c in chunk.get("choices", [])):
                        first = time.perf_counter() - start
                    if chunk.get("usage"):
                        tokens += chunk["usage"]["completion_tokens"]
            ttfts.append(first if first is not None else time.perf_counter() - start)

    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=64)) as client:
        await asyncio.gather(*(one(client, p) for p in PROMPTS[:1]))                     # warm up
        ttfts.clear()
        tokens = 0
        start = time.perf_counter()
        await asyncio.gather(*(one(client, p) for p in WORKLOAD))
        elapsed = time.perf_counter() - start
    assert tokens == len(WORKLOAD) * NEW_TOKENS, tokens
    return tokens / elapsed, statistics.median(ttfts)


def _conch(tmp: Path, folder: str) -> Server:
    repo = tmp / "repo"
    (repo / MODEL / "1").mkdir(parents=True)
    (repo / MODEL / "config.pbtxt").write_text('backend: "vllm"\nmax_batch_size: 0\n')
    (repo / MODEL / "1" / "model.json").write_text(json.dumps({"model": folder, **ENGINE_ARGS}))
    return start_server(["--model-repository", str(repo)], tmp, timeout=900, env=VLLM_ENV)


def _vllm(tmp: Path, folder: str) -> Server:
    port = free_port()
    flags = [f"--{k.replace('_', '-')}" if v is True else f"--{k.replace('_', '-')}={v}"
             for k, v in ENGINE_ARGS.items()]
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--host", "127.0.0.1", "--port", str(port),
           "--model", folder, "--served-model-name", MODEL, *flags]
    log = tmp / "vllm-server.log"
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env={**os.environ, **VLLM_ENV})
    return wait_ready(proc, f"http://127.0.0.1:{port}", log, 900, what="vllm server", poll=0.5)


def main() -> None:
    if importlib.util.find_spec("vllm") is None:
        print("vllm is not installed here: run `make bench-vllm` (it uses .venv-vllm)")
        return
    from conch.engine.weights import ensure_smollm2

    folder = str(ensure_smollm2())
    with tempfile.TemporaryDirectory(prefix="conch-bench-vllm-") as tmp:
        conch = _conch(Path(tmp), folder)
        vllm = _vllm(Path(tmp), folder)
        try:
            _report({c: _rounds(conch.url, vllm.url, c) for c in CONCURRENCIES})
        finally:
            conch.stop()
            vllm.stop()


def _rounds(conch: str, vllm: str, concurrency: int) -> dict[str, list[tuple[float, float]]]:
    figures: dict[str, list[tuple[float, float]]] = {"conch": [], "vllm": []}
    for i in range(ROUNDS):
        for side in (("conch", "vllm") if i % 2 == 0 else ("vllm", "conch")):
            figures[side].append(asyncio.run(_run(conch if side == "conch" else vllm, concurrency)))
    return figures


def _report(results: dict[int, dict[str, list[tuple[float, float]]]]) -> None:
    print(f"Conch (vllm backend) vs vLLM's OpenAI server: {len(WORKLOAD)} chat prompts x {NEW_TOKENS} tokens, "
          f"greedy, ignore_eos, streamed; {ROUNDS} alternating rounds, medians")
    print(f"  {'conc':>4} {'vLLM tok/s':>11} {'Conch tok/s':>12} {'ratio':>7}   {'vLLM TTFT ms':>12} "
          f"{'Conch TTFT ms':>13} {'ratio':>7}")
    for c, f in results.items():
        med = {s: (statistics.median(r[0] for r in f[s]), statistics.median(r[1] for r in f[s])) for s in f}
        tps = statistics.median(a[0] / b[0] for a, b in zip(f["conch"], f["vllm"], strict=True))
        ttft = statistics.median(a[1] / b[1] for a, b in zip(f["conch"], f["vllm"], strict=True))
        print(f"  {c:4d} {med['vllm'][0]:11.1f} {med['conch'][0]:12.1f} {tps:6.3f}x   {med['vllm'][1] * 1e3:12.1f} "
              f"{med['conch'][1] * 1e3:13.1f} {ttft:6.3f}x   tok/s goal >= 0.95x {'met' if tps >= 0.95 else 'NOT met'}"
              f", TTFT goal <= 1.1x {'met' if ttft <= 1.1 else 'NOT met'}")


if __name__ == "__main__":
    main()
