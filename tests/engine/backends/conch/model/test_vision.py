"""Llava on the flattened runner (model/vision.py): logits equal HF's LlavaForConditionalGeneration on the same
random weights, whole or with the prefill cut inside an image; the tower runs once per image across steps and
requests (a resent screenshot is not encoded again), and batched across the requests of a step."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoImageProcessor, AutoTokenizer, LlavaForConditionalGeneration

from conch.engine.backends.conch.backend import ConchBackend
from conch.engine.backends.conch.kv.slot_store import SlotKVStore
from conch.engine.backends.conch.model.llama import LlamaForward
from conch.engine.backends.conch.model.vision import TextView, VisionTower
from conch.engine.errors import BackendUnavailable, InvalidRequest
from conch.engine.images import ImageInput
from conch.engine.repository import ModelConfig
from conch.engine.types import GenerationRequest, SamplingParams
from conch.engine.weights.tiny_llava import ensure_tiny_llava
from tests.engine.backends.conch.steps import Occupant, make_step
from tests.images import picture

N = 16          # the tiny model's tokens an image (32x32 pixels, 8x8 patches)


@pytest.fixture(scope="module")
def llava():
    folder = ensure_tiny_llava()
    return LlavaForConditionalGeneration.from_pretrained(folder, dtype=torch.float32).eval(), \
        AutoImageProcessor.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)


def _image(seed: int) -> ImageInput:
    return ImageInput.of(picture(seed), "image")


def test_logits_equal_hf_llava_whole_and_cut_inside_an_image(llava):
    model, processor, tokenizer = llava
    tower = VisionTower(model, processor, tokenizer)
    assert tower.tokens_per_image == N
    img = model.config.image_token_id
    ids = list(range(100, 110)) + [img] * N + list(range(200, 205)) + [img] * N + [7, 8]
    images = (_image(1), _image(2))
    prompt = tower.prompt(ids, images)
    with torch.inference_mode():
        pixels = torch.stack(prompt.pixels)
        want = model(input_ids=torch.tensor([ids]), pixel_values=pixels).logits[0]
    text = TextView(model)
    forward = LlamaForward(text)
    c = text.config
    kv = SlotKVStore(c.num_hidden_layers, c.num_key_value_heads, forward.head_dim, torch.float32, 2**24, 2)
    a, b = kv.admit(Occupant(), 128), kv.admit(Occupant(), 128)
    seq = SimpleNamespace(vision=prompt)
    whole = make_step([(a, 0, ids)], [len(ids) - 1])
    got = forward(tower.splice(whole, [seq], [(0, len(ids))]), kv)[0]
    torch.testing.assert_close(got, want[-1], atol=1e-4, rtol=1e-4)
    assert tower.calls == 1 and tower.encoded == 2           # both images in one tower forward
    cut = 18                                                 # inside the first image's run (10..25)
    forward(tower.splice(make_step([(b, 0, ids[:cut])], [cut - 1]), [seq], [(0, cut)]), kv)
    rest = make_step([(b, cut, ids[cut:])], [len(ids) - cut - 1])
    got = forward(tower.splice(rest, [seq], [(cut, len(ids) - cut)]), kv)[0]
    torch.testing.assert_close(got, want[-1], atol=1e-4, rtol=1e-4)
    assert tower.calls == 1                                  # kept by content hash: not encoded again


def test_the_cache_keys_tell_images_apart(llava):
    model, processor, tokenizer = llava
    tower = VisionTower(model, processor, tokenizer)
    ids = [5, 6] + [model.config.image_token_id] * N + [9]
    one, again, other = (tower.prompt(ids, (_image(s),)).key_ids for s in (1, 1, 2))
    assert one == again and one != other and one[:2] == (5, 6) and one[-1] == 9
    with pytest.raises(InvalidRequest, match="placeholders"):
        tower.prompt(ids, (_image(1), _image(2)))
    with pytest.raises(InvalidRequest, match="does not decode"):
        tower.prompt(ids, (ImageInput.of(b"\x89PNG\r\n\x1a\n" + b"\x00" * 30, "image"),))


async def _ask(backend, ids, images, rid: str) -> tuple[list[float], int, int]:
    """(each token's logprob, prompt tokens, cached prompt tokens)."""
    req = GenerationRequest(id=rid, model="m", prompt_token_ids=tuple(ids), images=images,
                            params=SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True, logprobs=0))
    out, usage = [], None
    async for delta in backend.generate(req):
        out += [round(p.chosen.logprob, 4) for p in delta.logprobs]
        usage = delta.usage or usage
    assert usage is not None
    return out, usage.prompt_tokens, usage.cached_tokens


async def test_the_backend_encodes_a_resent_image_once_and_batches_a_step():
    backend = ConchBackend(ModelConfig(name="m", weights="builtin:tiny-llava", dtype="float32"))
    await backend.start()
    try:
        vision = backend.capabilities.vision
        assert vision is not None and vision.tokens_per_image == N and vision.placeholder == "<image>"
        tower = backend.runner.vision
        ids = list(range(100, 350)) + [vision.token_id] * N + [4, 5] * 20    # the prefix cache's 256-token head
        first, used, _ = await _ask(backend, ids, (_image(1),), "a")         # ends inside the image
        assert used == len(ids) and tower.calls == 1
        _, _, cached = await _ask(backend, ids + [6, 7], (_image(1),), "b")     # the next turn resends it
        assert tower.calls == 1 and cached == 256                               # its KV reused, not recomputed
        other, _, cached = await _ask(backend, ids, (_image(2),), "c")
        assert tower.calls == 2 and cached == 0 and other != first    # the same text, another image: no kept KV
        assert (await _ask(backend, ids, (_image(1),), "d"))[0] == first
        calls = tower.calls
        together = await asyncio.gather(*[_ask(backend, ids, (_image(s),), f"t{s}") for s in (10, 11, 12)])
        assert tower.encoded == 5 and tower.calls > calls
        alone = [await _ask(backend, ids, (_image(s),), f"s{s}") for s in (10, 11, 12)]
        assert [t[0] for t in together] == [a[0] for a in alone]
    finally:
        await backend.stop()


async def test_a_vision_model_needs_the_flattened_runner():
    backend = ConchBackend(ModelConfig(name="m", weights="builtin:tiny-llava", dtype="float32", runner="hf"))
    with pytest.raises(BackendUnavailable, match="flattened runner only"):
        await backend.start()
    await backend.stop()
