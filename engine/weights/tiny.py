"""A tiny random-weights Llama with SmolLM2's tokenizer, built locally for fast tests and benchmarks.

Its outputs are noise, which is the point: constrained decoding must make even noise parse.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from conch.engine.weights.cache_dir import DONE, cache_dir, publish
from conch.engine.weights.smollm2 import ensure_smollm2

TINY_MODEL_ID = "tiny-random-llama"


def ensure_tiny_model(seed: int = 0) -> Path:
    target = cache_dir() / f"{TINY_MODEL_ID}-{seed}"
    if (target / DONE).exists():
        return target
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(ensure_smollm2())
    publish(tiny_llama(tokenizer, seed, max_positions=2048), tokenizer, target)
    return target


def tiny_llama(tokenizer: Any, seed: int, max_positions: int) -> Any:
    """The tiny Llama over `tokenizer`'s vocabulary (2 layers, hidden 64, tied embeddings), float32, its weights
    drawn from `seed` (the same seed, the same weights)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    # transformers decorates PreTrainedModel.to with functools.wraps(nn.Module.to), which mypy reads as the
    # unbound function (dtype taken for `self`): a typing artifact of the library, the call is right
    return LlamaForCausalLM(config).to(torch.float32)  # type: ignore[arg-type]
