"""A tiny random-weights Llama with SmolLM2's tokenizer, built locally for fast tests and benchmarks.

Its outputs are noise, which is the point: constrained decoding must make even noise parse.
"""
from __future__ import annotations

from pathlib import Path

from conch.engine.weights.cache_dir import DONE, cache_dir, publish
from conch.engine.weights.smollm2 import ensure_smollm2

TINY_MODEL_ID = "tiny-random-llama"


def ensure_tiny_model(seed: int = 0) -> Path:
    target = cache_dir() / f"{TINY_MODEL_ID}-{seed}"
    if (target / DONE).exists():
        return target
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    source = ensure_smollm2()
    tokenizer = AutoTokenizer.from_pretrained(source)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    # transformers decorates PreTrainedModel.to with functools.wraps(nn.Module.to), which mypy reads as the
    # unbound function (dtype taken for `self`): a typing artifact of the library, the call is right
    model = LlamaForCausalLM(config).to(torch.float32)  # type: ignore[arg-type]
    publish(model, tokenizer, target)
    return target
