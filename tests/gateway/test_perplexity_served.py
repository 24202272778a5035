"""Perplexity of a GGUF-served model over a fixed text, through Conch's prompt logprobs (/v1/completions with
echo, logprobs and max_tokens 0, the openai SDK), beside the same weights served from their float32 folder:
one random-weights Llama (SmolLM2's vocabulary, weights of std 0.1 so the model is peaked and a wrong weight
shows), its GGUF written in Q8_0 (gguf's own quantizer). Both served in float32 by one real server; the two
perplexities agree within 1% (the quantization's effect; measured here: see docs/models.md)."""
from __future__ import annotations

import math

import pytest
from openai import OpenAI
from transformers import AutoTokenizer

from conch.engine.backends.conch import native
from conch.engine.weights import ensure_smollm2
from tests.conftest import start_server, write_repository
from tests.gguf_files import small_llama, write_llama_gguf

TEXT = ("The harbour was quiet in the early morning. Fishing boats rocked at their moorings while gulls circled "
        "overhead, and the smell of salt and tar hung over the stone quay. An old man mended a net by the steps, "
        "counting the knots under his breath, and a child watched him from the harbour wall.")
WITHIN = 0.01


def perplexity(client: OpenAI, model: str, text: str) -> float:
    """exp(-mean log p(token | tokens before)) over the text's tokens after the first, from the prompt's logprobs."""
    reply = client.completions.create(model=model, prompt=text, max_tokens=0, echo=True, logprobs=0)
    scored = [lp for lp in reply.choices[0].logprobs.token_logprobs if lp is not None]
    assert len(scored) > 40
    return math.exp(-sum(scored) / len(scored))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if native.load("quant_matmul") is None:
        pytest.skip("no C++ compiler: the quantized kernels cannot be built here")
    root = tmp_path_factory.mktemp("ppl")
    model = small_llama(hidden=256, inter=512, init=0.1)
    model.save_pretrained(root / "folder")
    AutoTokenizer.from_pretrained(ensure_smollm2()).save_pretrained(root / "folder")
    gguf = write_llama_gguf(model, root / "m-q8_0.gguf", "Q8_0")
    repo = write_repository(root / "repo", {
        "q8": {"weights": str(gguf), "dtype": "float32", "tokenizer": str(root / "folder")},
        "f32": {"weights": str(root / "folder"), "dtype": "float32"}})
    server = start_server(["--model-repository", str(repo)], root, timeout=600)
    yield server
    server.stop()


def test_a_gguf_served_models_perplexity_is_its_float32_weights(server):
    client = OpenAI(base_url=f"{server.url}/v1", api_key="none")
    quantized, reference = perplexity(client, "q8", TEXT), perplexity(client, "f32", TEXT)
    assert abs(math.log(reference / 49152)) > 1.0              # far from uniform: peaked, so a wrong weight shows
    assert abs(quantized / reference - 1) <= WITHIN, (quantized, reference)
