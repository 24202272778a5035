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
    fused: Any = None         # native/fused_ops.cpp: residual add + RMSNorm, SiLU x up

    @classmethod
    def load(cls, dtype: torch.dtype, head_dim: int) -> Kernels:
        if dtype != torch.bfloat16:
            return cls()
        decode = native.load("decode_attention")
        prefill = native.load("prefill_attention") if head_dim in (64, 128) else None
        return cls(decode=decode.decode_attention if decode is not None else None,
                   prefill=prefill.prefill_attention if prefill is not None and prefill.available() else None,
                   fused=native.load("fused_ops"))

