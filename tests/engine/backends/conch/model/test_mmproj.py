"""A Gemma 3 vision-language model as llama.cpp ships it (model/mmproj.py): a tiny random-weights Gemma 3 saved in
the hub's layout, converted by llama.cpp's own convert_hf_to_gguf.py into a model GGUF and (`--mmproj`) its
projector GGUF; Conch loads the pair (`weights` + `mmproj`) and its logits on an image match the folder-loaded
model's, through HF's forward and through the flattened runner; `conch serve model.gguf --mmproj mmproj.gguf`
answers the openai SDK with an image.

Needs the llama.cpp source distribution (`make llama-cpp`, or only its first step: the converter and gguf-py
are Python, nothing is built); skipped without it. The converted files are kept under the cache directory.
llama.cpp's Gemma 3 shape: a global layer every 6th, and no query_pre_attn_scalar in the file (transformers
reads 256), so the text model here has 6 layers and head_dim 256."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import openai
import pytest
import torch
from transformers import AutoProcessor

from conch.engine.backends.conch import loader
from conch.engine.backends.conch.backend import ConchBackend
from conch.engine.errors import BackendUnavailable
from conch.engine.images import ImageInput
from conch.engine.repository import ModelConfig
from conch.engine.types import GenerationRequest, SamplingParams
from conch.engine.weights.cache_dir import DONE, cache_dir
from conch.engine.weights.hub_layout import HubLayout
from conch.engine.weights.tiny_gemma3 import gemma3_processor, gemma3_tokenizer, tiny_gemma3, tiny_gemma3_config
from tests.conftest import start_server
from tests.images import data_url, picture

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[5]
LLAMA_CPP = Path(os.environ.get("LLAMA_CPP_DIR", ROOT / ".llama-cpp"))
TEXT = dict(num_hidden_layers=6, head_dim=256, query_pre_attn_scalar=256, sliding_window=16, layer_types=None)
PROMPT = "<start_of_turn>user\nWhat is this?<start_of_image><end_of_turn>\n<start_of_turn>model\n"


def _converter() -> Path | None:
    found = sorted(LLAMA_CPP.glob("llama_cpp_python-*/vendor/llama.cpp/convert_hf_to_gguf.py"))
    return found[-1] if found else None


def _convert(converter: Path, folder: Path, out: Path, *flags: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(converter.parent / "gguf-py")}    # its own gguf-py, not the installed
    subprocess.run([sys.executable, str(converter), str(folder), "--outtype", "f32", "--outfile", str(out), *flags],
                   check=True, capture_output=True, env=env)


@pytest.fixture(scope="module")
def made() -> Path:
    """A folder holding hub/ (the HF model), model.gguf and mmproj.gguf; built once, then kept."""
    converter = _converter()
    if converter is None:
        pytest.skip("no llama.cpp source here (make llama-cpp)")
    target = cache_dir() / f"tiny-random-gemma3-gguf-{converter.parents[2].name}"
    if (target / DONE).exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    tokenizer = gemma3_tokenizer()
    model = tiny_gemma3(tiny_gemma3_config(tokenizer, **TEXT), tokenizer, seed=0)
    HubLayout(model).save_pretrained(target / "hub")         # the layout llama.cpp's converter reads
    gemma3_processor(tokenizer).save_pretrained(target / "hub")
    _convert(converter, target / "hub", target / "model.gguf")
    _convert(converter, target / "hub", target / "mmproj.gguf", "--mmproj")
    (target / DONE).touch()
    return target


def _inputs(made: Path, *seeds: int):
    images = tuple(ImageInput.of(picture(seed, 70, 50), "image") for seed in seeds)
    processor = AutoProcessor.from_pretrained(made / "hub")
    text = PROMPT.replace("<start_of_image>", "<start_of_image>" * len(seeds))
    batch = processor(text=[text], images=[[i.rgb() for i in images]], return_tensors="pt", add_special_tokens=False)
    return batch, images


def _configs(made: Path) -> tuple[ModelConfig, ModelConfig]:
    folder = ModelConfig(name="m", weights=str(made / "hub"), dtype="float32", prefix_cache_mb=0)
    pair = ModelConfig(name="m", weights=str(made / "model.gguf"), mmproj=str(made / "mmproj.gguf"),
                       dtype="float32", prefix_cache_mb=0)
    return folder, pair


def test_the_gguf_pair_gives_the_folders_logits_on_images(made):
    batch, images = _inputs(made, 1, 2)
    folder, pair = (loader.load(c) for c in _configs(made))
    assert type(pair.model) is type(folder.model) and pair.processor is not None
    pixels = pair.processor(images=[i.rgb() for i in images], return_tensors="pt")["pixel_values"]
    torch.testing.assert_close(pixels, batch["pixel_values"])       # the header's size, mean and std: the same
    with torch.inference_mode():
        want, got = folder.model(**batch).logits[0], pair.model(**batch).logits[0]
    # the converter keeps the input projection in f16 (llama.cpp's issue 13025): the one rounding between them
    torch.testing.assert_close(got, want, atol=2e-3, rtol=0)
    other, _ = _inputs(made, 1, 3)
    with torch.inference_mode():
        assert not torch.allclose(pair.model(**other).logits[0, -1], got[-1], atol=1e-2)     # images matter


async def _first_logprobs(config: ModelConfig, ids: list[int], images) -> list[float]:
    backend = ConchBackend(config)
    await backend.start()
    try:
        req = GenerationRequest(id="r", model="m", prompt_token_ids=tuple(ids), images=images,
                                params=SamplingParams(max_tokens=1, temperature=0.0, logprobs=5))
        out = [delta async for delta in backend.generate(req)]
        return [t.logprob for d in out for p in d.logprobs for t in (p.chosen, *p.top)]
    finally:
        await backend.stop()


async def test_the_flattened_runner_serves_the_gguf_pair_as_the_folder(made):
    batch, images = _inputs(made, 4)
    ids = batch["input_ids"][0].tolist()
    folder, pair = _configs(made)
    want, got = await _first_logprobs(folder, ids, images), await _first_logprobs(pair, ids, images)
    assert got == pytest.approx(want, abs=2e-3) and len(got) == 6


def test_an_mmproj_is_refused_where_it_does_not_belong(made):
    with pytest.raises(Exception, match="goes with .gguf weights"):
        loader.load(ModelConfig(name="m", weights=str(made / "hub"), mmproj=str(made / "mmproj.gguf")))
    with pytest.raises(BackendUnavailable, match="not an mmproj"):
        loader.load(ModelConfig(name="m", weights=str(made / "model.gguf"), mmproj=str(made / "model.gguf")))


def test_conch_serve_a_gguf_with_its_mmproj_answers_with_an_image(made, tmp_path):
    server = start_server([str(made / "model.gguf"), "--mmproj", str(made / "mmproj.gguf")], tmp_path)
    try:
        client = openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0)

        def ask(image: bytes):
            return client.chat.completions.create(model="model", max_tokens=3, temperature=0, logprobs=True,
                                                  messages=[{"role": "user", "content": [
                                                      {"type": "text", "text": "What is this?"},
                                                      {"type": "image_url", "image_url": {"url": data_url(image)}}]}])

        seen, other = ask(picture(5)), ask(picture(6))
        assert seen.choices[0].finish_reason == "length" and seen.usage.prompt_tokens > 16
        assert [t.logprob for t in seen.choices[0].logprobs.content] != \
            [t.logprob for t in other.choices[0].logprobs.content]
        assert "vision, 16 tokens an image" in server.log.read_text()
    finally:
        server.stop()
