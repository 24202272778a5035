"""The attention of a causal LM's HF forward (prompt logprobs; the HF runner's steps): torch's SDPA over float32
copies of a half-precision model's q, k and v (and a float mask), its output cast back to the model's dtype.

Why: torch's CPU SDPA on bf16 inputs is less exact on a CPU without AMX than the other kernels of the same
forward. The packaged SmolLM2 Q4_1's perplexity over tests/data/perplexity.txt (llama-perplexity's chunks),
bf16 model, on an AVX512-BF16 CPU without AMX: 23.49 with bf16 SDPA, 23.72 with transformers' eager attention
(float32 softmax), 23.67 for the float32 model; on an AMX CPU bf16 SDPA gave 23.63. llama-perplexity: 23.86.

`register()` adds NAME to transformers' attention and mask registries (the mask is SDPA's); the loader passes
NAME as `attn_implementation`."""
from __future__ import annotations

from typing import Any

import torch

NAME = "sdpa_float32"


def _forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             attention_mask: torch.Tensor | None, **kwargs: Any) -> tuple[torch.Tensor, Any]:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    dtype = query.dtype
    if dtype == torch.float32:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.float()
    if isinstance(kwargs.get("position_bias"), torch.Tensor):
        kwargs["position_bias"] = kwargs["position_bias"].float()
    output, weights = sdpa_attention_forward(module, query.float(), key.float(), value.float(), attention_mask,
                                             **kwargs)
    return output.to(dtype), weights


def register() -> str:
    """NAME, registered with transformers (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, _forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME
