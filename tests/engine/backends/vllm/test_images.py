"""Images through the vllm backend, on CPU without vLLM: a fake vLLM (its AsyncLLM, TokensPrompt and
SamplingParams; the real package is not imported) records the prompt the backend hands it. The images reach
vLLM's `multi_modal_data` as decoded PIL images, in prompt order, behind the prompt's one placeholder token per
image (vLLM expands it); a multimodal model config gives the backend its vision, a text one none."""
from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace

import pytest

from conch.engine.backends.vllm.backend import VLLMBackend
from conch.engine.backends.vllm.images import multi_modal_data, vision_spec
from conch.engine.errors import InvalidRequest
from conch.engine.images import ImageInput
from conch.engine.repository.config import ModelConfig
from conch.engine.types import GenerationRequest, SamplingParams
from tests.images import picture

IMAGE_TOKEN = 32000


class FakeEngine:
    """vLLM's AsyncLLM as the backend drives it: generate(prompt, params, request_id) -> DELTA outputs."""

    def __init__(self) -> None:
        self.prompts: list[dict] = []
        self.errored = False

    async def generate(self, prompt, params, request_id):
        self.prompts.append(prompt)
        done = SimpleNamespace(token_ids=[7], text="ok", logprobs=None, finish_reason="length", stop_reason=None)
        yield SimpleNamespace(outputs=[done])

    async def abort(self, request_id) -> None:
        pass


@pytest.fixture
def backend(monkeypatch):
    sampling = ModuleType("vllm.sampling_params")
    sampling.RequestOutputKind = SimpleNamespace(DELTA="delta")
    sampling.StructuredOutputsParams = dict
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    b = object.__new__(VLLMBackend)           # no vLLM here: the parts generate() uses, set by hand
    b._vllm = SimpleNamespace(SamplingParams=lambda **kw: kw, TokensPrompt=lambda **kw: kw)
    b.config, b.args = ModelConfig(name="m", backend="vllm"), {}
    b._engine, b._fanout, b._active = FakeEngine(), {}, 0
    return b


async def _run(backend, images) -> list:
    request = GenerationRequest(id="r", model="m", prompt_token_ids=(1, IMAGE_TOKEN, 2, IMAGE_TOKEN, 3),
                                images=images, params=SamplingParams(max_tokens=1, n=len(images) or 1))
    return [d async for d in backend.generate(request)]


async def test_images_reach_vllms_multimodal_inputs_in_prompt_order(backend):
    shots = (ImageInput.of(picture(1, 40, 30), "image"), ImageInput.of(picture(2, 20, 50, "JPEG"), "image"))
    deltas = await _run(backend, shots)
    assert len(deltas) == 2 and all(d.finished for d in deltas)          # n=2: each choice got the images
    for prompt in backend._engine.prompts:
        assert prompt["prompt_token_ids"] == [1, IMAGE_TOKEN, 2, IMAGE_TOKEN, 3]     # one token an image
        assert [(i.mode, i.size) for i in prompt["multi_modal_data"]["image"]] == [("RGB", (40, 30)),
                                                                                    ("RGB", (20, 50))]
    await _run(backend, ())
    assert "multi_modal_data" not in backend._engine.prompts[-1]


def test_an_undecodable_image_is_a_400():
    with pytest.raises(InvalidRequest, match="image 0"):
        multi_modal_data((ImageInput.of(b"\x89PNG\r\n\x1a\n" + b"\x00" * 20, "image"),))


def test_the_vision_of_a_multimodal_model_config():
    tokenizer = SimpleNamespace(convert_ids_to_tokens=lambda i: "<image>" if i == IMAGE_TOKEN else "?")
    llava = SimpleNamespace(is_multimodal_model=True, hf_config=SimpleNamespace(image_token_index=IMAGE_TOKEN))
    spec = vision_spec(llava, tokenizer)
    assert spec is not None and (spec.placeholder, spec.token_id, spec.tokens_per_image) == ("<image>", IMAGE_TOKEN, 1)
    assert vision_spec(SimpleNamespace(is_multimodal_model=False), tokenizer) is None
    assert vision_spec(SimpleNamespace(is_multimodal_model=True, hf_config=SimpleNamespace()), tokenizer) is None
