"""One server, several models: does one model's work slow another's decode once it is done?

torch's OpenMP runtime keeps a team of workers for every thread that ran a parallel region, for that thread's
life, and slows every parallel region of the process once it holds more workers than cores
(engine/torch_threads.py). Before stop 63 a second own-engine model, or one embedding batch run on asyncio's
executor, left such a team behind and the chat model decoded 2.3x slower from then on.

First `conch serve` with the default chat model alone (`chat`: builtin:smollm2, bf16): its chat c1 tokens/s
(CONCH_BENCH_SHARED_REQUESTS, default 4, streamed greedy chats of 64 tokens, ignore_eos, one after another, the
openai SDK), the median of CONCH_BENCH_SHARED_ROUNDS (default 3) runs: `single`. Then one server holding `chat`,
a second copy of it (`other`) and the default embedding model (`embed`: builtin:minilm), chat c1 in four phases:
  alone     `other` and `embed` loaded, never asked
  embedded  after 3 /v1/embeddings requests
  other     after `other` answered 2 chats (then idle)
  together  `chat` and `other` decoding at once, c1 each: their total
each the median over ROUNDS rounds of the four, set against `single`. Goal: alone, embedded and other >= 0.9x
single (what another model loaded or done leaves behind does not slow the next). `together` shows what two
models decoding at once get from 2 cores (each thread's team on the same cores). Printed, no timed asserts.
"""
from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from openai import OpenAI

from tests.bench.bench_engine_speed import _client
from tests.bench.bench_gguf import _one, cpu_flags

REQUESTS = int(os.environ.get("CONCH_BENCH_SHARED_REQUESTS", 4))
ROUNDS = int(os.environ.get("CONCH_BENCH_SHARED_ROUNDS", 3))
TOKENS = 64
PROMPT = "Write a short paragraph about the sea."
PHASES = ("alone", "embedded", "other", "together")


async def _chats(url: str, model: str, requests: int = REQUESTS, max_tokens: int = TOKENS) -> int:
    """Tokens of `requests` streamed greedy chats, one after another."""
    async with _client(url) as client:
        return sum([await _one(client, PROMPT, max_tokens, model) for _ in range(requests)])


async def _rate(url: str, *models: str) -> float:
    """Total tokens/s of c1 chats to each of `models`, all at once."""
    start = time.perf_counter()
    tokens = await asyncio.gather(*[_chats(url, m) for m in models])
    return sum(tokens) / (time.perf_counter() - start)


def _round(url: str) -> dict[str, float]:
    client = OpenAI(base_url=f"{url}/v1", api_key="bench", max_retries=0)
    rates = {"alone": asyncio.run(_rate(url, "chat"))}
    for _ in range(3):
        client.embeddings.create(model="embed", input=["the quick brown fox jumps over the lazy dog"] * 4)
    rates["embedded"] = asyncio.run(_rate(url, "chat"))
    asyncio.run(_chats(url, "other", requests=2))
    rates["other"] = asyncio.run(_rate(url, "chat"))
    rates["together"] = asyncio.run(_rate(url, "chat", "other"))
    return rates


def _single(root: Path) -> float:
    from tests.conftest import start_server, write_repository

    repository = write_repository(root / "single", {"chat": {"weights": "builtin:smollm2"}})
    server = start_server(["--model-repository", str(repository)], root, fork=False)
    try:
        asyncio.run(_chats(server.url, "chat", requests=1, max_tokens=4))        # warm-up
        runs = [asyncio.run(_rate(server.url, "chat")) for _ in range(ROUNDS)]
    finally:
        server.stop()
    print(f"  single: chat c1 {' '.join(f'{r:.1f}' for r in runs)} tok/s", flush=True)
    return statistics.median(runs)


def _shared(root: Path) -> list[dict[str, float]]:
    from tests.conftest import start_server, write_repository

    repository = write_repository(root / "shared", {
        "chat": {"weights": "builtin:smollm2"}, "other": {"weights": "builtin:smollm2"},
        "embed": {"backend": "embedding", "weights": "builtin:minilm", "dtype": "float32"}})
    server = start_server(["--model-repository", str(repository)], root, fork=False)
    try:
        asyncio.run(_chats(server.url, "chat", requests=1, max_tokens=4))        # warm-up
        rounds = []
        for r in range(ROUNDS):
            time.sleep(1.0)               # every engine thread parked (engine_core.py)
            rounds.append(_round(server.url))
            print(f"  round {r + 1}: " + "  ".join(f"{p} {rounds[-1][p]:6.1f}" for p in PHASES) + " tok/s", flush=True)
    finally:
        server.stop()
    return rounds


def main() -> None:
    root = Path(tempfile.mkdtemp())
    print(f"CPU flags: {cpu_flags()}; {os.cpu_count()} cores; chat c1: {REQUESTS} x {TOKENS} tokens", flush=True)
    single = _single(root)
    rounds = _shared(root)
    print(f"single    chat c1 {single:7.1f} tok/s", flush=True)
    for phase in PHASES:
        rate = statistics.median(x[phase] for x in rounds)
        print(f"{phase:9} chat c1 {rate:7.1f} tok/s  {rate / single:5.2f}x single", flush=True)
    print("goal: alone, embedded and other >= 0.9x single (together: both models' total)", flush=True)


if __name__ == "__main__":
    main()
