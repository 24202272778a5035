"""Issue 2's workload: chat prompts, 64 new tokens each, greedy, SmolLM2 in bf16.

Figures are ratios against baselines measured in the same run: Conch at concurrency 1, transformers'
own `generate` on static padded batches and sequentially, and the in-process engine vs HTTP + SDK.
"""
from __future__ import annotations

import asyncio
import time

import psutil
import torch

from conch.engine.engine import Engine
from conch.engine.weights import DEFAULT_MODEL_ID
from conch.engine.repository import ModelRepository
from conch.engine.types import GenerationRequest, SamplingParams

NEW_TOKENS = 64
TOPICS = ["the sea", "a robot", "autumn", "a city at night", "coffee", "mountains", "a lost key", "the moon"]
PROMPTS = [f"Write a short paragraph about {t}{'!' * (i % 4)}" for i, t in enumerate(TOPICS * 4)]  # 32 prompts


def _chat_ids(tokenizer, prompt: str) -> list[int]:
    text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                         add_generation_prompt=True)
    return tokenizer.encode(text, add_special_tokens=False)


async def _engine_run(engine: Engine, prompts: list[list[int]], concurrency: int) -> float:
    """Tokens/s of the in-process engine with `concurrency` requests in flight."""
    sem = asyncio.Semaphore(concurrency)
    params = SamplingParams(max_tokens=NEW_TOKENS, temperature=0.0, ignore_eos=True)

    async def one(i: int, ids: list[int]) -> int:
        async with sem:
            n = 0
            req = GenerationRequest(id=f"b{concurrency}-{i}", model=DEFAULT_MODEL_ID, prompt_token_ids=tuple(ids),
                                    params=params)
            async for d in engine.generate(req):
                n += len(d.token_ids)
            return n

    start = time.perf_counter()
    total = sum(await asyncio.gather(*[one(i, p) for i, p in enumerate(prompts)]))
    return total / (time.perf_counter() - start)


def _hf_static(model, tokenizer, prompts: list[list[int]], batch: int) -> float:
    pad = tokenizer.pad_token_id
    start, total = time.perf_counter(), 0
    for k in range(0, len(prompts), batch):
        group = prompts[k:k + batch]
        width = max(map(len, group))
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in group])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in group])
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=NEW_TOKENS,
                                 min_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=pad)
        total += (out.shape[1] - width) * len(group)
    return total / (time.perf_counter() - start)


async def _http_run(url: str, prompts: list[str], concurrency: int) -> float:
    import openai

    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
    sem = asyncio.Semaphore(concurrency)

    async def one(p: str) -> int:
        async with sem:
            r = await client.chat.completions.create(model=DEFAULT_MODEL_ID, messages=[{"role": "user", "content": p}],
                                                     max_tokens=NEW_TOKENS, temperature=0,
                                                     extra_body={"ignore_eos": True})
            return r.usage.completion_tokens

    start = time.perf_counter()
    total = sum(await asyncio.gather(*[one(p) for p in prompts]))
    return total / (time.perf_counter() - start)


def _serve_over_http(prompts: list[str]) -> tuple[float, float]:
    """tokens/s through a `conch serve` process, and that process's resident memory in GB."""
    import tempfile
    from pathlib import Path

    from tests.conftest import start_server

    server = start_server([], Path(tempfile.mkdtemp()), fork=False)      # its resident memory: a fresh process
    try:
        rss = psutil.Process(server.process.pid).memory_info().rss / 1e9
        asyncio.run(_http_run(server.url, prompts[:4], 4))          # warm-up
        return asyncio.run(_http_run(server.url, prompts, 16)), rss
    finally:
        server.stop()


async def _in_process() -> dict:
    engine = Engine(ModelRepository())
    await engine.start()
    model = engine.get(DEFAULT_MODEL_ID)
    backend = model.backend
    ids = [_chat_ids(model.tokenizer, p) for p in PROMPTS]
    await _engine_run(engine, ids[:2], 2)                               # warm-up
    fig = {"c1": await _engine_run(engine, ids[:4], 1)}
    backend.core.step_seconds = backend.core.forward_seconds = 0.0
    fig["c16"] = await _engine_run(engine, ids, 16)
    fig["outside_forward"] = 1 - backend.core.forward_seconds / backend.core.step_seconds
    hf = backend.runner.model
    fig["hf_static16"] = _hf_static(hf, model.tokenizer, ids, 16)
    fig["hf_sequential"] = _hf_static(hf, model.tokenizer, ids[:4], 1)
    await engine.stop()
    return fig


def main() -> None:
    fig = asyncio.run(_in_process())
    fig["http_c16"], rss = _serve_over_http(PROMPTS)
    print(f"workload: {len(PROMPTS)} chat prompts x {NEW_TOKENS} new tokens, greedy, bf16, "
          f"{torch.get_num_threads()} threads")
    for key in ("c1", "c16", "hf_static16", "hf_sequential", "http_c16"):
        print(f"  {key:<14} {fig[key]:8.1f} tokens/s")
    _ratio("conch c16 / conch c1", fig["c16"] / fig["c1"], 4.0)
    _ratio("conch c16 / hf static batches of 16", fig["c16"] / fig["hf_static16"], 1.0)
    _ratio("conch c16 / hf sequential generate", fig["c16"] / fig["hf_sequential"], 5.0)
    _ratio("http+sdk c16 / in-process c16", fig["http_c16"] / fig["c16"], 0.9)
    print(f"  time outside forward at c16: {fig['outside_forward'] * 100:.1f}% of step time (goal <= 10%)")
    print(f"  resident memory, default model loaded: {rss:.2f} GB (goal <= 1.5 GB)")


def _ratio(name: str, value: float, goal: float) -> None:
    print(f"  {name:<40} {value:5.2f}x (goal >= {goal}x) {'ok' if value >= goal else 'SHORT'}")


if __name__ == "__main__":
    main()
