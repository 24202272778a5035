"""Gemma 3 on the flattened runner (model/vision_families.py): the prompt expands as Gemma3Processor writes it,
and the logits at every position equal HF's Gemma3ForConditionalGeneration given the processor's whole output
(its token_type_ids: an image's tokens attend to each other both ways, on the sliding-window layers too), with
two images, a prompt past the sliding window, prefill in chunks and two sequences in one step; a prefill chunk
never ends inside an image, whatever the step's token budget."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from transformers import AutoProcessor, AutoTokenizer, Gemma3ForConditionalGeneration

from conch.engine.backends.conch.backend import ConchBackend
from conch.engine.backends.conch.kv.slot_store import SlotKVStore
from conch.engine.backends.conch.model.llama import LlamaForward
from conch.engine.backends.conch.model.vision import TextView, VisionTower
from conch.engine.images import ImageInput
from conch.engine.repository import ModelConfig
from conch.engine.types import GenerationRequest, SamplingParams
from conch.engine.weights.tiny_gemma3 import TOKENS, ensure_tiny_gemma3
from tests.engine.backends.conch.steps import Occupant, make_step
from tests.images import picture

N = TOKENS      # the tiny model's tokens an image (64x64 pixels, 8x8 patches pooled 2x2)


@pytest.fixture(scope="module")
def gemma():
    folder = ensure_tiny_gemma3()
    model = Gemma3ForConditionalGeneration.from_pretrained(folder, dtype=torch.float32).eval()
    processor = AutoProcessor.from_pretrained(folder)
    return model, processor, AutoTokenizer.from_pretrained(folder)


def _images(*seeds: int) -> tuple[ImageInput, ...]:
    return tuple(ImageInput.of(picture(seed, 70, 50), "image") for seed in seeds)


def _chat(tokenizer, images: int) -> str:
    content = "Look at these:" + "<start_of_image>" * images + " and say which is brighter, in a word or two."
    return tokenizer.apply_chat_template([{"role": "system", "content": "You see images."},
                                          {"role": "user", "content": content}],
                                         tokenize=False, add_generation_prompt=True)


def _hf(model, processor, text: str, images: tuple[ImageInput, ...]):
    inputs = processor(text=[text], images=[[image.rgb() for image in images]], return_tensors="pt",
                       add_special_tokens=False)
    with torch.inference_mode():
        return inputs, model(**inputs).logits[0]


def test_the_prompt_expands_and_preprocesses_as_gemma3s_processor(gemma):
    model, processor, tokenizer = gemma
    tower = VisionTower(model, processor.image_processor, tokenizer)
    spec, images = tower.spec, _images(1, 2)
    assert spec.placeholder == "<start_of_image>" and spec.tokens_per_image == N
    text = _chat(tokenizer, 2)
    inputs = processor(text=[text], images=[[image.rgb() for image in images]], return_tensors="pt",
                       add_special_tokens=False)
    ids = tokenizer.encode(spec.expand(text), add_special_tokens=False)
    assert ids == inputs["input_ids"][0].tolist() and ids.count(spec.token_id) == 2 * N
    prompt = tower.prompt(ids, images)
    torch.testing.assert_close(torch.stack(prompt.pixels), inputs["pixel_values"])


def _forward(model):
    text = TextView(model)
    forward = LlamaForward(text)
    c = text.config
    return forward, SlotKVStore(c.num_hidden_layers, c.num_key_value_heads, forward.head_dim, torch.float32, 2**24, 3)


def test_logits_equal_hf_gemma3_at_every_position_whole_and_in_chunks(gemma):
    model, processor, tokenizer = gemma
    tower = VisionTower(model, processor.image_processor, tokenizer)
    images = _images(1, 2)
    text = _chat(tokenizer, 2)
    inputs, want = _hf(model, processor, text, images)
    ids = inputs["input_ids"][0].tolist()
    prompt = tower.prompt(ids, images)
    first, second = prompt.starts
    assert first > 8 and second > first + N                    # text before each image, past the window of 8
    assert not torch.allclose(want[-1], _hf(model, processor, text, _images(1, 3))[1][-1])    # images matter
    forward, kv = _forward(model)
    seq = SimpleNamespace(vision=prompt)
    a, b = kv.admit(Occupant(), 256), kv.admit(Occupant(), 256)
    every = list(range(len(ids)))
    got = forward(tower.splice(make_step([(a, 0, ids)], every), [seq], [(0, len(ids))]), kv)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    cuts = [0, first - 3, prompt.chunk(first - 3, 5), second + N + 2, len(ids)]    # the second cut: past image 1
    assert cuts[2] == first + N - (first - 3)
    cuts[2] += cuts[1]
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        step = make_step([(b, lo, ids[lo:hi])], list(range(hi - lo)))
        got = forward(tower.splice(step, [seq], [(lo, hi - lo)]), kv)
        torch.testing.assert_close(got, want[lo:hi], atol=1e-4, rtol=1e-4)


def test_two_sequences_in_one_step_each_see_their_own_images(gemma):
    model, processor, tokenizer = gemma
    tower = VisionTower(model, processor.image_processor, tokenizer)
    one, two = _chat(tokenizer, 1), _chat(tokenizer, 2)
    (in1, want1), (in2, want2) = _hf(model, processor, one, _images(3)), _hf(model, processor, two, _images(4, 5))
    ids1, ids2 = in1["input_ids"][0].tolist(), in2["input_ids"][0].tolist()
    seqs = [SimpleNamespace(vision=tower.prompt(ids1, _images(3))),
            SimpleNamespace(vision=tower.prompt(ids2, _images(4, 5)))]
    forward, kv = _forward(model)
    a, b = kv.admit(Occupant(), 256), kv.admit(Occupant(), 256)
    step = make_step([(a, 0, ids1), (b, 0, ids2)], [len(ids1) - 1, len(ids1) + len(ids2) - 1])
    got = forward(tower.splice(step, seqs, [(0, len(ids1)), (0, len(ids2))]), kv)
    torch.testing.assert_close(got, torch.stack([want1[-1], want2[-1]]), atol=1e-4, rtol=1e-4)
    assert tower.calls == 1 and tower.encoded == 3


async def _greedy(backend, ids, images) -> list[float]:
    req = GenerationRequest(id="r", model="m", prompt_token_ids=tuple(ids), images=images,
                            params=SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True, logprobs=0))
    out = []
    async for delta in backend.generate(req):
        out += [p.chosen.logprob for p in delta.logprobs]
    return out


@pytest.mark.parametrize("step_tokens", [40, 2048])    # 40: the first chunk would end inside image 2
async def test_the_backend_never_cuts_an_image_across_chunks(gemma, step_tokens):
    model, processor, tokenizer = gemma
    backend = ConchBackend(ModelConfig(name="m", weights="builtin:tiny-gemma3", dtype="float32",
                                       max_step_tokens=step_tokens, prefix_cache_mb=0))
    await backend.start()
    try:
        vision = backend.capabilities.vision
        assert vision is not None and vision.tokens_per_image == N and vision.image_text is not None
        images = _images(6, 7)
        inputs, want = _hf(model, processor, _chat(tokenizer, 2), images)
        ids = inputs["input_ids"][0].tolist()
        got = await _greedy(backend, ids, images)
        first = torch.log_softmax(want[-1], -1).max().item()     # the first token's greedy logprob, as HF has it
        assert got[0] == pytest.approx(first, abs=1e-5) and len(got) == 4
    finally:
        await backend.stop()


async def test_prompt_logprobs_score_the_text_with_its_images_in_place(gemma):
    """Each prompt token scored by the whole model's forward with the images (an image's own tokens score the
    placeholder id where it stands, as vLLM's do): the text after an image is read given that image."""
    model, processor, tokenizer = gemma
    backend = ConchBackend(ModelConfig(name="m", weights="builtin:tiny-gemma3", dtype="float32"))
    await backend.start()
    try:
        async def scored(seeds: tuple[int, ...]) -> list[float]:
            images = _images(*seeds)
            ids = _hf(model, processor, _chat(tokenizer, 2), images)[0]["input_ids"][0].tolist()
            req = GenerationRequest(id="p", model="m", prompt_token_ids=tuple(ids), images=images,
                                    params=SamplingParams(max_tokens=0, prompt_logprobs=0))
            return [p.chosen.logprob for d in [d async for d in backend.generate(req)] for p in d.prompt_logprobs]

        inputs, logits = _hf(model, processor, _chat(tokenizer, 2), _images(1, 2))
        ids = inputs["input_ids"][0]
        want = torch.log_softmax(logits[:-1], -1).gather(-1, ids[1:].unsqueeze(-1)).squeeze(-1).tolist()
        got = await scored((1, 2))
        assert got == pytest.approx(want, abs=1e-4)
        last = len(ids) - 2                                      # the prompt's last token, after both images
        assert got[last] != pytest.approx((await scored((1, 3)))[last], abs=1e-6)
    finally:
        await backend.stop()
