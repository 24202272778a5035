"""Triton's face: streamed tokens/s through gRPC ModelStreamInfer and HTTP /v2 generate_stream at
concurrency 16, as ratios of the in-process engine measured in the same run (goal >= 0.9x for both).

SmolLM2 (the default model), 32 prompts x 64 new tokens, greedy, ignore_eos, every token streamed.

Both sides serve the same config.yaml (`num_threads`: CONCH_BENCH_THREADS, default all cores). torch's intra-op
threads wait for one another at every op, so any other busy process on the machine (another benchmark, a test
run) slows every step 3-10x: that is what made the in-process part look hung, and why the three faces are
measured back to back in each of ROUNDS rounds and compared round by round (median of the ratios).
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
import numpy as np

from conch.engine.engine import Engine
from conch.engine.weights import DEFAULT_MODEL_ID
from conch.engine.repository import ModelRepository
from conch.engine.types import GenerationRequest, SamplingParams

NEW_TOKENS, CONCURRENCY = 64, 16
TOPICS = ["the sea", "a robot", "autumn", "a city at night", "coffee", "mountains", "a key", "the moon"]
PROMPTS = [f"Write a short paragraph about {t}{'!' * (i % 4)}" for i, t in enumerate(TOPICS * 4)]
SAMPLING = {"max_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True}
THREADS = int(os.environ.get("CONCH_BENCH_THREADS", os.cpu_count() or 1))
ROUNDS = int(os.environ.get("CONCH_BENCH_ROUNDS", 5))


def _repository() -> Path:
    from tests.conftest import write_repository

    return write_repository(Path(tempfile.mkdtemp()), {DEFAULT_MODEL_ID: {"weights": "builtin:smollm2",
                                                                          "num_threads": THREADS}})


async def _timed(one, prompts: list[str]) -> float:
    sem = asyncio.Semaphore(CONCURRENCY)

    async def bounded(i: int, p: str) -> int:
        async with sem:
            return await one(i, p)

    start = time.perf_counter()
    total = sum(await asyncio.gather(*[bounded(i, p) for i, p in enumerate(prompts)]))
    return total / (time.perf_counter() - start)


def _engine_one(engine: Engine):
    params = SamplingParams(max_tokens=NEW_TOKENS, temperature=0.0, ignore_eos=True)

    async def one(i: int, p: str) -> int:
        n = 0
        async for d in engine.generate(GenerationRequest(id=f"e{i}-{time.monotonic_ns()}", model=DEFAULT_MODEL_ID,
                                                          prompt=p, params=params, stream=True)):
            n += len(d.token_ids)
        return n
    return one


def _grpc_one(client):
    import tritonclient.grpc.aio as aioclient

    def inputs(prompt: str) -> list:
        out = []
        for name, value, datatype in (("text_input", prompt.encode(), "BYTES"),
                                      ("sampling_parameters", json.dumps(SAMPLING).encode(), "BYTES"),
                                      ("stream", True, "BOOL"), ("return_num_output_tokens", True, "BOOL")):
            t = aioclient.InferInput(name, [1], datatype)
            t.set_data_from_numpy(np.array([value], dtype=np.object_ if datatype == "BYTES" else bool))
            out.append(t)
        return out

    async def one(i: int, p: str) -> int:
        async def requests():
            yield {"model_name": DEFAULT_MODEL_ID, "inputs": inputs(p), "request_id": f"g{i}"}
        n = 0
        async for result, error in client.stream_infer(requests()):
            if error is not None:
                raise error
            counted = result.as_numpy("num_output_tokens")
            if counted is not None:
                n = int(counted[0])
                break
        return n
    return one


def _http_one(client: httpx.AsyncClient, url: str):
    async def one(i: int, p: str) -> int:
        body = {"text_input": p, "parameters": {**SAMPLING, "return_num_output_tokens": True}}
        async with client.stream("POST", f"{url}/v2/models/{DEFAULT_MODEL_ID}/generate_stream", json=body) as r:
            n = 0
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    n = json.loads(line[6:]).get("num_output_tokens", n)
            return n
    return one


async def _rounds(root: Path, server, rounds: int) -> dict[str, list[float]]:
    """Each round measures the in-process engine, gRPC and HTTP back to back (the server idles meanwhile)."""
    import tritonclient.grpc.aio as aioclient

    engine = Engine(ModelRepository(root))
    await engine.start()
    figures: dict[str, list[float]] = {"engine": [], "grpc": [], "http": []}
    async with aioclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as grpc_client, \
            httpx.AsyncClient(timeout=300) as http_client:
        faces = {"engine": _engine_one(engine), "grpc": _grpc_one(grpc_client),
                 "http": _http_one(http_client, server.url)}
        for one in faces.values():
            await _timed(one, PROMPTS[:4])                          # warm-up
        for r in range(rounds):
            for name, one in faces.items():
                figures[name].append(await _timed(one, PROMPTS))
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f} tok/s" for k, v in figures.items()), flush=True)
    await engine.stop()
    return figures


def main() -> None:
    from tests.conftest import free_port, start_server

    root = _repository()
    grpc_port = free_port()
    server = start_server(["--model-repository", str(root), "--grpc-port", str(grpc_port)], root)
    server.grpc_port = grpc_port
    try:
        figures = asyncio.run(_rounds(root, server, ROUNDS))
    finally:
        server.stop()
    ratios = {face: statistics.median(f / e for f, e in zip(figures[face], figures["engine"], strict=True))
              for face in ("grpc", "http")}
    med = {k: statistics.median(v) for k, v in figures.items()}
    print(f"workload: {len(PROMPTS)} prompts x {NEW_TOKENS} streamed tokens, greedy, concurrency {CONCURRENCY}, "
          f"{THREADS} torch threads of {os.cpu_count()} cores, median of {ROUNDS} rounds")
    print(f"in-process engine        {med['engine']:8.1f} tok/s")
    print(f"gRPC ModelStreamInfer    {med['grpc']:8.1f} tok/s  {ratios['grpc']:.2f}x  (goal >= 0.9x)")
    print(f"HTTP /v2 generate_stream {med['http']:8.1f} tok/s  {ratios['http']:.2f}x  (goal >= 0.9x)")


if __name__ == "__main__":
    main()
