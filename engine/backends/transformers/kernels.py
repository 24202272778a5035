"""The native kernels (native/) a Llama-family forward can use for its dtype and head size."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from engine.backends.transformers import native


@dataclass(frozen=True)
class Kernels:
    """The native kernels this model's dtype and head size can use; None: torch's ops and SDPA serve."""
    decode: Any = None        # native/decode_attention.cpp: decode rows over their slots' columns
    prefill: Any = None       # native/prefill_attention.cpp: a prefill chunk, causal, over its slot
    rows: Any = None          # native/prefill_attention.cpp: one-token rows batched, each as a chunk computes it
    fused: Any = None         # native/fused_ops.cpp: residual add + RMSNorm, SiLU x up
    narrow: Any = None        # native/narrow_matmul.cpp: products of a few rows (every product if batch-invariant)

    @classmethod
    def load(cls, dtype: torch.dtype, head_dim: int, batch_invariant: bool = False) -> Kernels:
        """batch_invariant: one-token rows (decode) run `rows` rather than `decode` where the prefill kernel
        serves, so every token's attention is computed by the same arithmetic (llama.py's Numerics)."""
        if dtype != torch.bfloat16:
            return cls()
        decode = native.load("decode_attention")
        prefill = native.load("prefill_attention") if head_dim in (64, 128) else None
        if prefill is not None and not prefill.available():
            prefill = None
        narrow = native.load("narrow_matmul")
        if narrow is not None and not narrow.available():
            narrow = None
        return cls(decode=decode.decode_attention if decode is not None else None,
                   prefill=prefill.prefill_attention if prefill is not None else None,
                   rows=prefill.attention_rows if prefill is not None and batch_invariant else None,
                   fused=native.load("fused_ops"), narrow=narrow)

