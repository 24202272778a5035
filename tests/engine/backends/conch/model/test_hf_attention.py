"""The HF forward's attention (model/hf_attention.py): a bf16 model's prompt perplexity is its float32 model's.
The packaged SmolLM2 Q4_1 over tests/data/perplexity.txt, llama-perplexity's chunks (160 tokens, each one's
second half scored), loaded in bf16 and in float32 by the engine's loader: within 0.25% (bf16 SDPA was 0.73% off
on an AVX512-BF16 CPU without AMX; float32 attention: 0.01%)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from conch.engine.backends.conch import loader
from conch.engine.backends.conch.model import hf_attention
from conch.engine.repository import ModelConfig
from conch.engine.weights.smollm2 import gguf_path

TEXT = Path(__file__).resolve().parents[5] / "tests" / "data" / "perplexity.txt"
N_CTX, CHUNKS = 160, 3


def _perplexity(dtype: str, tokens: list[int]) -> float:
    model = loader.load(ModelConfig.from_mapping("m", {"backend": "conch", "weights": str(gguf_path()),
                                                       "dtype": dtype})).model
    hf = model.hf()                 # the skeleton's HF model (gguf_skeleton.py), whose forward this scores
    assert hf.config._attn_implementation == hf_attention.NAME
    nll, count = 0.0, 0
    with torch.no_grad():
        for i in range(CHUNKS):
            chunk = torch.tensor([tokens[i * N_CTX:(i + 1) * N_CTX]])
            logprobs = model(chunk).logits[0].float().log_softmax(-1)
            targets = chunk[0, N_CTX // 2 + 1:]
            nll -= logprobs[N_CTX // 2:-1].gather(1, targets[:, None]).sum().item()
            count += len(targets)
    return math.exp(nll / count)


@pytest.fixture(scope="module")
def tokens() -> list[int]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf_path().parent, gguf_file=gguf_path().name)
    return tokenizer(TEXT.read_text(), add_special_tokens=False)["input_ids"][:N_CTX * CHUNKS]


def test_a_bf16_models_perplexity_is_its_float32_models(tokens):
    bf16, float32 = _perplexity("bfloat16", tokens), _perplexity("float32", tokens)
    assert abs(bf16 / float32 - 1) <= 0.0025, (bf16, float32)
