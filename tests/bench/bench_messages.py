"""Issue 30's figures, measured in the same run:

1. /v1/messages vs /v1/chat/completions on the same workload (the same prompt, greedy, NEW_TOKENS new tokens,
   ignore_eos off, CONCURRENCY requests in flight): tokens/s ratio (goal >= 0.97x) and the difference of TTFT
   p50 over streamed requests (goal +<= 2 ms). Rounds alternate the faces' order; medians of the pairs.
2. A replayed Claude-Code-shaped session (a long system prompt behind a billing line that changes every
   request, three turns): the later turns' TTFT with the billing line dropped (the default) vs kept
   (`--keep-billing-header`), as a ratio (the cache win).

Model: SmolLM2 (float32); CONCH_BENCH_MESSAGES_MODEL=tiny for a quick run.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from tests.conftest import start_server, write_repository

NEW_TOKENS = 32
REQUESTS = 32
CONCURRENCY = 8
ROUNDS = 4
PROMPT = "Write a short story about a lighthouse keeper."


def _bodies(face: str, i: int, stream: bool) -> tuple[str, dict]:
    messages = [{"role": "user", "content": f"{PROMPT} ({i})"}]
    body = {"model": "m", "max_tokens": NEW_TOKENS, "temperature": 0, "messages": messages, "stream": stream}
    return ("/v1/messages", body) if face == "messages" else ("/v1/chat/completions", body)


def _has_text(line: str) -> bool:
    """An SSE data line that carries generated text (chat's first chunk carries only the role)."""
    return '"text_delta"' in line or re.search(r'"content":"[^"]', line) is not None


async def _first_byte(client: httpx.AsyncClient, path: str, body: dict) -> float:
    """Seconds to the first content event of a streamed request (the stream is read to its end)."""
    start, first = time.perf_counter(), None
    async with client.stream("POST", path, json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if first is None and line.startswith("data:") and _has_text(line):
                first = time.perf_counter() - start
    return first if first is not None else time.perf_counter() - start


async def _tokens(client: httpx.AsyncClient, path: str, body: dict) -> int:
    r = await client.post(path, json=body)
    r.raise_for_status()
    usage = r.json()["usage"]
    return usage.get("output_tokens", usage.get("completion_tokens", 0))


async def _face_round(url: str, face: str) -> tuple[float, float]:
    """(tokens/s at CONCURRENCY, TTFT p50 in seconds of sequential streamed requests)."""
    sem = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        async def one(i: int) -> int:
            async with sem:
                return await _tokens(client, *_bodies(face, i, False))

        start = time.perf_counter()
        tokens = sum(await asyncio.gather(*(one(i) for i in range(REQUESTS))))
        rate = tokens / (time.perf_counter() - start)
        ttfts = [await _first_byte(client, *_bodies(face, i, True)) for i in range(8)]
    return rate, statistics.median(ttfts)


def faces_bench(url: str) -> None:
    ratios, ttft_diffs = [], []
    for i in range(ROUNDS):
        got = {face: asyncio.run(_face_round(url, face))
               for face in (("chat", "messages") if i % 2 == 0 else ("messages", "chat"))}
        ratios.append(got["messages"][0] / got["chat"][0])
        ttft_diffs.append((got["messages"][1] - got["chat"][1]) * 1e3)
    ratio, diff = statistics.median(ratios), statistics.median(ttft_diffs)
    print(f"/v1/messages vs /v1/chat/completions, {REQUESTS} requests of {NEW_TOKENS} tokens at concurrency "
          f"{CONCURRENCY} ({ROUNDS} rounds)")
    print(f"  tokens/s messages/chat: {ratio:.3f}x  goal >= 0.97x {'met' if ratio >= 0.97 else 'NOT met'}")
    print(f"  TTFT p50 messages - chat: {diff:+.2f} ms  goal <= +2 ms {'met' if diff <= 2 else 'NOT met'}")


def _session_body(turn: int) -> dict:
    billing = f"x-anthropic-billing-header: cc_version=2.1.3; cc_entrypoint=cli; cch={uuid.uuid4().hex[:5]};"
    guide = " ".join(f"Rule {i}: read files before editing them." for i in range(60))
    messages = [{"role": "user", "content": "What does setup.py install?"}]
    for n in range(turn):
        use = f"toolu_{n:024d}"
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": use, "name": "Read",
                                                        "input": {"file_path": f"f{n}.py"}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use, "content": "ok"}]}]
    tool = {"name": "Read", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}
    return {"model": "claude-sonnet-4-5", "max_tokens": 4, "temperature": 0, "stream": True, "tools": [tool],
            "system": [{"type": "text", "text": billing}, {"type": "text", "text": guide}], "messages": messages}


async def _session_ttfts(url: str) -> list[float]:
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        ttfts = []
        for turn in range(3):
            start = time.perf_counter()
            async with client.stream("POST", "/v1/messages", json=_session_body(turn)) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data:") and json.loads(line[5:])["type"] == "content_block_start":
                        ttfts.append(time.perf_counter() - start)
                        break
        return ttfts[1:]                                            # the later turns


def session_bench(repo: Path, tmp: Path) -> None:
    rows = {}
    for label, extra in (("dropped", []), ("kept", ["--keep-billing-header"])):
        server = start_server(["--model-repository", str(repo), "--model-alias", "claude-*=m", *extra], tmp)
        try:
            rows[label] = statistics.median(t for _ in range(3) for t in asyncio.run(_session_ttfts(server.url)))
        finally:
            server.stop()
    print("replayed Claude-Code session, turns 2-3, TTFT median (3 sessions)")
    print(f"  billing line dropped {rows['dropped'] * 1e3:8.1f} ms, kept {rows['kept'] * 1e3:8.1f} ms: "
          f"kept/dropped {rows['kept'] / rows['dropped']:.2f}x (the cache win)")


def main() -> None:
    weights = "builtin:tiny" if os.environ.get("CONCH_BENCH_MESSAGES_MODEL") == "tiny" else "builtin:smollm2"
    with tempfile.TemporaryDirectory(prefix="conch-bench-messages-") as tmp:
        repo = write_repository(Path(tmp) / "repo", {"m": {"weights": weights, "dtype": "float32",
                                                           "max_batch_size": 16}})
        server = start_server(["--model-repository", str(repo)], Path(tmp))
        try:
            faces_bench(server.url)
        finally:
            server.stop()
        session_bench(repo, Path(tmp))


if __name__ == "__main__":
    main()
