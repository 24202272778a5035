"""Triton's face: streamed tokens/s through gRPC ModelStreamInfer and HTTP /v2 generate_stream at
concurrency 16, as ratios of the in-process engine measured in the same run (goal >= 0.9x for both).

SmolLM2 (the default model), 32 prompts x 64 new tokens, greedy, ignore_eos, every token streamed.
"""
from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from engine.engine import Engine
from engine.models import DEFAULT_MODEL_ID
from engine.repository import ModelRepository
from engine.types import GenerationRequest, SamplingParams

NEW_TOKENS, CONCURRENCY = 64, 16
PROMPTS = [f"Write a short paragraph about {t}{'!' * (i % 4)}" for i, t in
           enumerate(["the sea", "a robot", "autumn", "a city at night", "coffee", "mountains", "a key", "the moon"] * 4)]
SAMPLING = {"max_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True}


async def _timed(one, prompts: list[str]) -> float:
    sem = asyncio.Semaphore(CONCURRENCY)

    async def bounded(i: int, p: str) -> int:
        async with sem:
            return await one(i, p)

    start = time.perf_counter()
    total = sum(await asyncio.gather(*[bounded(i, p) for i, p in enumerate(prompts)]))
    return total / (time.perf_counter() - start)


async def _engine_tps() -> float:
    engine = Engine(ModelRepository())
    await engine.start()
    params = SamplingParams(max_tokens=NEW_TOKENS, temperature=0.0, ignore_eos=True)

    async def one(i: int, p: str) -> int:
        n = 0
        async for d in engine.generate(GenerationRequest(id=f"e{i}-{time.monotonic_ns()}", model=DEFAULT_MODEL_ID,
                                                          prompt=p, params=params, stream=True)):
            n += len(d.token_ids)
        return n

    await _timed(one, PROMPTS[:4])                                  # warm-up
    tps = await _timed(one, PROMPTS)
    await engine.stop()
    return tps


async def _grpc_tps(port: int) -> float:
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

    async with aioclient.InferenceServerClient(f"127.0.0.1:{port}") as client:
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

        await _timed(one, PROMPTS[:4])
        return await _timed(one, PROMPTS)


async def _http_tps(url: str) -> float:
    async with httpx.AsyncClient(timeout=300) as client:
        async def one(i: int, p: str) -> int:
            body = {"text_input": p, "parameters": {**SAMPLING, "return_num_output_tokens": True}}
            async with client.stream("POST", f"{url}/v2/models/{DEFAULT_MODEL_ID}/generate_stream", json=body) as r:
                n = 0
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        n = json.loads(line[6:]).get("num_output_tokens", n)
                return n

        await _timed(one, PROMPTS[:4])
        return await _timed(one, PROMPTS)


def main() -> None:
    from tests.conftest import free_port, start_server

    engine_tps = asyncio.run(_engine_tps())
    print(f"in-process engine measured: {engine_tps:.1f} tok/s", flush=True)
    grpc_port = free_port()
    server = start_server(["--grpc-port", str(grpc_port)], Path(tempfile.mkdtemp()))
    try:
        grpc_tps = asyncio.run(_grpc_tps(grpc_port))
        print(f"gRPC measured: {grpc_tps:.1f} tok/s", flush=True)
        http_tps = asyncio.run(_http_tps(server.url))
    finally:
        server.stop()
    print(f"workload: {len(PROMPTS)} prompts x {NEW_TOKENS} streamed tokens, greedy, concurrency {CONCURRENCY}")
    print(f"in-process engine        {engine_tps:8.1f} tok/s")
    print(f"gRPC ModelStreamInfer    {grpc_tps:8.1f} tok/s  {grpc_tps / engine_tps:.2f}x  (goal >= 0.9x)")
    print(f"HTTP /v2 generate_stream {http_tps:8.1f} tok/s  {http_tps / engine_tps:.2f}x  (goal >= 0.9x)")


if __name__ == "__main__":
    main()
