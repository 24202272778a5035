"""Issue 28's figures: the Responses face against chat completions on the same engine, in the same run.

1. The same workload (streamed, CONCURRENCY at a time, MAX_TOKENS each, temperature 1 with a seed-free
   sampler so that no request is served by the response cache) through /v1/responses and through
   /v1/chat/completions: output tokens/s and time to the first text delta (TTFT) p50. Rounds alternate the two
   faces (the order flipping each round) and medians are reported, so that background load hits both alike.
   Goals: tokens/s >= 0.97x of chat's, TTFT p50 at most 2 ms more.
2. A 4-turn conversation continued by `previous_response_id` against the same turns on chat, resending the
   whole history each turn: each turn's TTFT, and the later turns' (2-4) ratio Responses / chat. Goal <= 0.5x
   (the continuation's prompt extends the KV a slot kept).
"""
from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from conch.engine.weights import DEFAULT_MODEL_ID as MODEL
from tests.conftest import start_server, write_repository

CONCURRENCY = 8
REQUESTS = 64
ROUNDS = 4
MAX_TOKENS = 64
PROMPT = "Write a short paragraph about the sea."
TURNS = ["Tell me about whales.", "And dolphins?", "Which one is bigger?", "Summarize in one line."]


async def _stream(client: httpx.AsyncClient, url: str, body: dict, first_text) -> tuple[float, int, dict]:
    """(TTFT, text events, the last event) of one streamed request; `first_text(event)` says whether an
    event carries the first text."""
    start, ttft, count, last = time.perf_counter(), None, 0, {}
    async with client.stream("POST", url, json=body) as reply:
        reply.raise_for_status()
        async for line in reply.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            last = json.loads(line[6:])
            if first_text(last):
                count += 1
                ttft = ttft if ttft is not None else time.perf_counter() - start
    return ttft if ttft is not None else time.perf_counter() - start, count, last


def _responses_text(event: dict) -> bool:
    return event.get("type") == "response.output_text.delta"


def _chat_text(event: dict) -> bool:
    return any(c.get("delta", {}).get("content") for c in event.get("choices", ()))


FACES = {
    "responses": ("/v1/responses", {"model": MODEL, "input": PROMPT, "max_output_tokens": MAX_TOKENS,
                                    "stream": True, "store": False}, _responses_text),
    "chat": ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": PROMPT}],
                                      "max_tokens": MAX_TOKENS, "stream": True}, _chat_text),
}


async def _load(base: str, face: str) -> tuple[float, list[float]]:
    """(output tokens/s, TTFTs) of REQUESTS streamed requests at CONCURRENCY (a text event is a token)."""
    path, body, first_text = FACES[face]
    sem = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(base_url=base, timeout=300) as client:
        async def one() -> tuple[float, int, dict]:
            async with sem:
                return await _stream(client, path, body, first_text)

        await asyncio.gather(*(one() for _ in range(CONCURRENCY)))              # warm up
        start = time.perf_counter()
        results = await asyncio.gather(*(one() for _ in range(REQUESTS)))
        wall = time.perf_counter() - start
    return sum(n for _, n, _ in results) / wall, [t for t, _, _ in results]


async def _chain_responses(base: str) -> list[float]:
    ttfts, previous = [], None
    async with httpx.AsyncClient(base_url=base, timeout=300) as client:
        for turn in TURNS:
            body = {"model": MODEL, "input": turn, "max_output_tokens": MAX_TOKENS, "stream": True,
                    "temperature": 0, "previous_response_id": previous}
            ttft, _, last = await _stream(client, "/v1/responses", body, _responses_text)
            ttfts.append(ttft)
            previous = last["response"]["id"]
    return ttfts


def _collecting(text: list[str]):
    """A chat `first_text` that also gathers the answer's text (the next turn resends it)."""
    def first_text(event: dict) -> bool:
        pieces = [c.get("delta", {}).get("content") or "" for c in event.get("choices", ())]
        text.extend(pieces)
        return any(pieces)
    return first_text


async def _chain_chat(base: str) -> list[float]:
    ttfts, messages = [], []
    async with httpx.AsyncClient(base_url=base, timeout=300) as client:
        for turn in TURNS:
            messages.append({"role": "user", "content": turn})
            body = {"model": MODEL, "messages": messages, "max_tokens": MAX_TOKENS, "stream": True,
                    "temperature": 0, "cache": False}
            text: list[str] = []
            ttft, _, _ = await _stream(client, "/v1/chat/completions", body, _collecting(text))
            ttfts.append(ttft)
            messages.append({"role": "assistant", "content": "".join(text)})
    return ttfts


def _measure(base: str) -> dict:
    runs: dict[str, list] = {"responses": [], "chat": []}
    for i in range(ROUNDS):
        for face in (("responses", "chat") if i % 2 == 0 else ("chat", "responses")):
            runs[face].append(asyncio.run(_load(base, face)))
    return {face: {"tps": statistics.median(r for r, _ in results),
                   "ttft": statistics.median(statistics.median(t) for _, t in results)}
            for face, results in runs.items()}


def _chains(base: str) -> dict[str, list[float]]:
    """Per-turn TTFT medians over ROUNDS chains of each kind, alternating."""
    runs: dict[str, list[list[float]]] = {"responses": [], "chat": []}
    for i in range(ROUNDS):
        for kind in (("responses", "chat") if i % 2 == 0 else ("chat", "responses")):
            runs[kind].append(asyncio.run(_chain_responses(base) if kind == "responses" else _chain_chat(base)))
    return {kind: [statistics.median(turn) for turn in zip(*chains, strict=True)] for kind, chains in runs.items()}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="conch-bench-responses-") as tmp:
        repo = write_repository(Path(tmp) / "repo", {MODEL: {"weights": "builtin:smollm2",
                                                             "max_batch_size": CONCURRENCY * 2}})
        server = start_server(["--model-repository", str(repo), "--log-level", "warning"], Path(tmp))
        try:
            load, chains = _measure(server.url), _chains(server.url)
        finally:
            server.stop()
    r, c = load["responses"], load["chat"]
    print(f"Responses vs chat completions: streamed, c{CONCURRENCY}, {REQUESTS} requests of {MAX_TOKENS} tokens, "
          f"medians of {ROUNDS} alternating rounds")
    print(f"  tokens/s  responses {r['tps']:8.1f}  chat {c['tps']:8.1f}  ratio {r['tps'] / c['tps']:5.3f} "
          f"(goal >= 0.97)")
    print(f"  TTFT p50  responses {r['ttft'] * 1e3:7.2f}ms  chat {c['ttft'] * 1e3:7.2f}ms  difference "
          f"{(r['ttft'] - c['ttft']) * 1e3:+.2f}ms (goal <= +2 ms)")
    print(f"{len(TURNS)}-turn conversation: previous_response_id vs resending the history on chat (TTFT per turn)")
    for k, (rt, ct) in enumerate(zip(chains["responses"], chains["chat"], strict=True), start=1):
        print(f"  turn {k}  responses {rt * 1e3:7.2f}ms  chat {ct * 1e3:7.2f}ms  ratio {rt / ct:5.2f}")
    later = statistics.mean(chains["responses"][1:]) / statistics.mean(chains["chat"][1:])
    print(f"  later turns (2-{len(TURNS)}) ratio {later:5.2f} (goal <= 0.5)")


if __name__ == "__main__":
    main()
