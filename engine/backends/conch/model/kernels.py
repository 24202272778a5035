"""The native kernels (native/) a Llama-family forward can use for its dtype and head size."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from conch.engine.backends.conch import native
from conch.engine.backends.conch.model.matmul_path import MatmulPath, choose

# The attention kernel of each matmul path (native/<name>.cpp; both: attention_blocks.h): the AMX path's tiles, or
# AVX512-BF16 registers for every other path (a CPU without AVX512-BF16 has neither: SDPA serves).
ATTENTION = {"amx": "tile_attention"}
VECTOR_ATTENTION = "prefill_attention"


@dataclass(frozen=True)
class Kernels:
    """The native kernels this model's dtype and head size can use; None: torch's ops and SDPA serve."""
    decode: Any = None        # native/decode_attention.cpp: decode rows over a plain store's columns
    prefill: Any = None       # ATTENTION's kernel: a prefill chunk, causal, over its slot
    rows: Any = None          # ATTENTION's kernel: one-token rows batched, each as a chunk computes it
    fused: Any = None         # native/fused_ops.cpp: residual add + RMSNorm, SiLU x up, RoPE + the K/V write
    matmul: MatmulPath = MatmulPath("torch")     # the layers' matmuls (matmul_path.py)

    @property
    def narrow(self) -> Any:
        """The native matmul kernel (tile_matmul.cpp or narrow_matmul.cpp: rows independent), or None."""
        return self.matmul.kernel

    @property
    def blocked(self) -> bool:
        """Whether a store in the blocked layout can serve (slot_store.py): rope_store writes it, the prefill
        kernel reads it for chunks and (`rows`) for one-token rows, so every token's attention is the same
        arithmetic (llama.py's Numerics) and nothing is packed per call."""
        return self.prefill is not None and self.rows is not None and self.fused is not None

    @classmethod
    def load(cls, dtype: torch.dtype, head_dim: int, windowed: bool = False) -> Kernels:
        """`windowed`: the model has sliding-window layers, which attention.py serves from a plain store (the
        prefill kernel, which reads the blocked one, has no window bound), so no prefill kernel."""
        matmul = choose(dtype)
        if dtype != torch.bfloat16:
            return cls(matmul=matmul)
        prefill = _attention(matmul.name) if head_dim in (64, 128) and not windowed else None
        decode = native.load("decode_attention") if prefill is None else None    # a plain store's decode rows
        return cls(decode=decode.decode_attention if decode is not None else None,
                   prefill=prefill.prefill_attention if prefill is not None else None,
                   rows=prefill.attention_rows if prefill is not None else None,
                   fused=native.load("fused_ops"), matmul=matmul)


def _attention(path: str) -> Any:
    """The prefill-attention module for matmul path `path` that runs here, or None (SDPA serves)."""
    for name in dict.fromkeys((ATTENTION.get(path, VECTOR_ATTENTION), VECTOR_ATTENTION)):
        kernel = native.load(name)
        if kernel is not None and kernel.available():
            return kernel
    return None
