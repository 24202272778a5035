"""A model loaded from a GGUF (engine/weights/gguf_file.py) with its layers' matrices swapped for the file's
own quantized blocks (quantized.py's QuantLinear over the memory-mapped file), so that what stays in memory
is the file's bytes, not a dequantized copy.

Architectures whose GGUF tensor names this maps (ARCHS: llama.cpp's llama, qwen2, qwen3 and mistral names
for HF's Llama-style modules); llama.cpp's converter permutes a llama file's q/k rows (its RoPE pairs), which
are put back in HF's order here (a copy of those rows' blocks, still quantized). The token embedding stays the
dequantized tensor transformers made (a lookup, not a product)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from conch.engine.backends.conch.model.quantized import QUANT_TYPES, QuantizedMatrix, QuantLinear, read_matrices

log = logging.getLogger(__name__)

ARCHS = frozenset({"llama", "mistral", "qwen2", "qwen3"})
_MODULES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
            "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
            "ffn_down": "mlp.down_proj"}


def _hf_rows(n: int, heads: int) -> torch.Tensor:
    """The inverse of llama.cpp's q/k permutation (convert_hf_to_gguf.py's `permute`): file rows -> HF rows."""
    forward = torch.arange(n).view(heads, 2, n // heads // 2).transpose(1, 2).reshape(n)
    return torch.argsort(forward)


def _names(model: Any) -> dict[str, str]:
    """GGUF matrix name -> the HF module's name."""
    names = {"output.weight": "lm_head"}
    for i in range(model.config.num_hidden_layers):
        names |= {f"blk.{i}.{g}.weight": f"model.layers.{i}.{hf}" for g, hf in _MODULES.items()}
    return names


def swap_in_quantized(model: Any, path: Path, architecture: str, kernel: Any) -> int:
    """Replaces each Linear whose GGUF matrix has a kernel type by a QuantLinear over the file's blocks; frees
    the dequantized weight. Returns how many were swapped."""
    if architecture not in ARCHS:
        return 0
    matrices, c = read_matrices(path, kernel), model.config
    heads = {"attn_q": c.num_attention_heads, "attn_k": c.num_key_value_heads}
    swapped = 0
    for gguf_name, module_name in _names(model).items():
        matrix = matrices.get(gguf_name)
        if not isinstance(matrix, QuantizedMatrix):
            continue
        kind = gguf_name.split(".")[-2]
        if architecture == "llama" and kind in heads:
            matrix = matrix.rows(_hf_rows(matrix.blocks.shape[0], heads[kind]))
        parent_name, _, attr = module_name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        old = getattr(parent, attr)
        setattr(parent, attr, QuantLinear(matrix, None if old.bias is None else old.bias.detach()))
        swapped += 1
    if getattr(c, "tie_word_embeddings", False) and isinstance(model.lm_head, QuantLinear):
        model.config.tie_word_embeddings = False       # the embedding stays a tensor, the head the file's blocks
    log.info("%s: %d matrices kept in their GGUF blocks (%s)", path.name, swapped,
             ", ".join(sorted({n for n, q in QUANT_TYPES.items()
                               if any(isinstance(m, QuantizedMatrix) and m.qtype == q for m in matrices.values())})))
    return swapped
