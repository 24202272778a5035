"""Embeddings through Triton's dynamic batcher: /v1/embeddings req/s and p50 latency at concurrency 32, with the
batcher (max_batch_size 32) vs without (each request its own forward, max batch 1), same server, same run
(goal >= 3x req/s).

all-MiniLM-L6-v2 (the default embedding model), float32, one sentence of 12-20 words per request. The two
models are measured back to back in each of ROUNDS rounds; the figures are the medians over the rounds.
The batched model waits up to 10 ms (max_queue_delay_microseconds, CONCH_BENCH_DELAY_US) for a batch to fill:
without it the 32 clients settle into two cohorts that alternate, batches of about 16.
torch runs one intra-op thread by default (CONCH_BENCH_THREADS): on a shared machine more threads wait for one
another at every op and a one-row forward takes 20x longer, which would measure the contention, not batching.
"""
from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx

CONCURRENCY = 32
REQUESTS = int(os.environ.get("CONCH_BENCH_REQUESTS", 320))
FORMAT = os.environ.get("CONCH_BENCH_FORMAT", "base64")   # what the openai SDK asks for
DELAY_US = int(os.environ.get("CONCH_BENCH_DELAY_US", 10000))  # the batched model's max_queue_delay_microseconds
ROUNDS = int(os.environ.get("CONCH_BENCH_ROUNDS", 3))
THREADS = int(os.environ.get("CONCH_BENCH_THREADS", 1))   # see the note above
WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly hex every bold jester".split()
TEXTS = [" ".join(WORDS[(i + k) % len(WORDS)] for k in range(12 + i % 9)) for i in range(REQUESTS)]
MODELS = {"batched": {"max_batch_size": 32, "dynamic_batching": {"max_queue_delay_microseconds": DELAY_US}},
          "single": {"max_batch_size": 1}}


def _repository() -> Path:
    from tests.conftest import write_repository

    base = {"backend": "embedding", "weights": "builtin:minilm", "dtype": "float32", "num_threads": THREADS}
    return write_repository(Path(tempfile.mkdtemp()), {name: {**base, **cfg} for name, cfg in MODELS.items()})


class _Connection:
    """One keep-alive HTTP/1.1 connection with a minimal client: httpx costs more CPU per request than the
    server's whole request path, and on a small machine the load generator would be what is measured."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def open(cls, url: str) -> "_Connection":
        host, port = url.removeprefix("http://").split(":")
        return cls(*await asyncio.open_connection(host, int(port)), host)

    async def post(self, path: str, body: dict) -> bytes:
        data = json.dumps(body).encode()
        self.writer.write(f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = int(next(h.split(b":", 1)[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
        payload = await self.reader.readexactly(length)
        if status != 200:
            raise RuntimeError(f"{status}: {payload[:200]!r}")
        return payload

    def close(self) -> None:
        self.writer.close()


async def _measure(url: str, model: str) -> tuple[float, float]:
    """(requests per second, p50 latency in ms) of REQUESTS requests over CONCURRENCY connections."""
    connections = [await _Connection.open(url) for _ in range(CONCURRENCY)]
    latencies: list[float] = []

    async def client(conn: _Connection, texts: list[str]) -> None:
        for text in texts:
            began = time.perf_counter()
            await conn.post("/v1/embeddings", {"model": model, "input": text, "encoding_format": FORMAT})
            latencies.append(time.perf_counter() - began)

    def share(texts: list[str]) -> list[list[str]]:     # one slice per connection
        return [texts[i::CONCURRENCY] for i in range(CONCURRENCY)]

    try:
        await asyncio.gather(*(client(c, t) for c, t in zip(connections, share(TEXTS[:CONCURRENCY]), strict=True)))
        latencies.clear()                                  # the above warmed up every connection
        start = time.perf_counter()
        await asyncio.gather(*(client(c, t) for c, t in zip(connections, share(TEXTS), strict=True)))
        elapsed = time.perf_counter() - start
    finally:
        for c in connections:
            c.close()
    return len(TEXTS) / elapsed, statistics.median(latencies) * 1e3


def _batches(url: str, model: str) -> float:
    """Requests per forward so far (nv_inference_count / nv_inference_exec_count)."""
    text = httpx.get(f"{url}/metrics").text

    def value(name: str) -> float:
        row = next(r for r in text.splitlines() if r.startswith(f'{name}{{model="{model}"'))
        return float(row.rsplit(" ", 1)[1])

    return value("nv_inference_count") / max(1.0, value("nv_inference_exec_count"))


def main() -> None:
    from tests.conftest import start_server

    root = _repository()
    server = start_server(["--model-repository", str(root)], root, env={"HF_HUB_OFFLINE": "1"})
    try:
        rounds = {name: [] for name in MODELS}
        for r in range(ROUNDS):
            for name in MODELS:
                rounds[name].append(asyncio.run(_measure(server.url, name)))
                print(f"round {r + 1} {name}: {rounds[name][-1][0]:.1f} req/s, p50 {rounds[name][-1][1]:.1f} ms",
                      flush=True)
        summary = {name: (statistics.median(x for x, _ in v), statistics.median(y for _, y in v))
                   for name, v in rounds.items()}
        for name, (rps, p50) in summary.items():
            print(f"{name:8s} {rps:7.1f} req/s  p50 {p50:7.1f} ms  ({_batches(server.url, name):.1f} requests "
                  f"per forward)")
        print(f"dynamic batcher speed-up: {summary['batched'][0] / summary['single'][0]:.2f}x req/s "
              f"(goal >= 3x); c{CONCURRENCY}, {REQUESTS} requests x {ROUNDS} rounds, {THREADS} threads, "
              f"delay {DELAY_US} us, {FORMAT}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
