"""The Llama family's weights as the flattened forward reads them: q/k/v and gate/up fused into one matrix
each (q/k rows reordered into RoPE pairs), packed once into oneDNN's blocked layout where oneDNN takes the dtype.
The tensors are the loaded HF modules' own or fused copies, so the HF model stays usable (prompt logprobs).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from engine.backends.transformers.huge_pages import HugePageArena

PACK_HINT = 64       # the batch size oneDNN lays packed weights out for; measured best over decode 1..64 here
NARROW_ROWS = 8      # up to this many rows the narrow kernel (native/narrow_matmul.cpp) beats oneDNN here


def can_pack(dtype: torch.dtype) -> bool:
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        w = torch.ops.mkldnn._reorder_linear_weight(torch.ones(8, 8, dtype=dtype), PACK_HINT)
        torch.ops.mkldnn._linear_pointwise(torch.ones(2, 8, dtype=dtype), w, None, "none", [], "")
        return True
    except (RuntimeError, AttributeError):
        return False


@dataclass(frozen=True)
class NarrowPacking:
    """How narrow copies are made: native/narrow_matmul.cpp's layout, in huge pages (huge_pages.py)."""
    kernel: Any                 # the compiled module
    arena: HugePageArena


@dataclass(frozen=True)
class Narrow:
    """A weight's copy in native/narrow_matmul.cpp's streaming layout, for products of a few rows."""
    kernel: Any
    weight: torch.Tensor        # pack()'s (out, in), in the arena
    bias: torch.Tensor | None   # (out,) float32

    @classmethod
    def of(cls, packing: NarrowPacking | None, weight: torch.Tensor, bias: torch.Tensor | None) -> Narrow | None:
        if packing is None or weight.dtype != torch.bfloat16 or not packing.kernel.fits(*weight.shape):
            return None
        packed = packing.arena.copy(packing.kernel.pack(weight.detach()))
        return cls(packing.kernel, packed, None if bias is None else bias.detach().float())

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.kernel.matmul(x.contiguous(), self.weight, self.bias)


@dataclass(frozen=True)
class Dense:
    """y = x @ weight.T + bias for x (T, in). The weight is a copy packed once into oneDNN's blocked layout
    where oneDNN takes the dtype (opaque: only `_linear_pointwise` reads it); decode matmuls stream it from
    memory 1.4-1.7x faster than aten's plain (out, in) layout on this CPU, bit for bit equal in bf16.

    Batch invariance (`lone_row` False): oneDNN computes a lone row (x of shape (1, in)) through another
    reduction order than any x of 2 rows or more when in > 1024 (the last bf16 bit of ~15% of SmolLM2's down
    projection rows differs), while every x of 2..2100 rows gives each row the same bits (measured, 1 and 2
    threads). So a lone row is computed beside a zero row: a row's result never depends on the rows beside it.

    Narrow products (`narrow`, bf16 with the native kernel): up to NARROW_ROWS rows go through
    native/narrow_matmul.cpp over a second copy of the weight in its streaming layout, in huge pages (~1.9x
    oneDNN's speed for one row: a decode step reads every weight once), more through oneDNN. The two round
    alike to the bf16 bit in most rows, not in all: a row's bits then depend on how many rows share its
    product. Batch-invariant (lone_row False) with the native kernel, every product goes through it, whose
    rows are independent by construction (oneDNN and the zero row serve only where it is missing)."""
    weight: torch.Tensor
    bias: torch.Tensor | None
    packed: bool
    lone_row: bool = True       # False: never run a (1, in) product (batch-invariant)
    narrow: Narrow | None = None

    @classmethod
    def of(cls, weight: torch.Tensor, bias: torch.Tensor | None, pack: bool, lone_row: bool = True,
           narrow: NarrowPacking | None = None) -> Dense:
        """narrow: how to make the narrow copy, or None; taken only with lone_row (not batch-invariant)."""
        fast = Narrow.of(narrow, weight, bias)
        if pack:
            return cls(torch.ops.mkldnn._reorder_linear_weight(weight.detach(), PACK_HINT), bias, True, lone_row, fast)
        return cls(weight, bias, False, lone_row, fast)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.narrow is not None and (x.shape[0] <= NARROW_ROWS or not self.lone_row):
            return self.narrow(x)           # batch-invariant: every product, its rows independent by construction
        if x.shape[0] == 1 and not self.lone_row:
            return self._product(torch.cat([x, torch.zeros_like(x)]))[:1]
        return self._product(x)

    def _product(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed:
            return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")
        return F.linear(x, self.weight, self.bias)


@dataclass(frozen=True)
class Layer:
    norm1: torch.Tensor
    qkv: Dense                  # (hidden) -> (q + 2 kv)
    o: Dense
    norm2: torch.Tensor
    gate_up: Dense              # (hidden) -> (2 inter)
    down: Dense


def _cat_bias(*mods: Any) -> torch.Tensor | None:
    if all(m.bias is None for m in mods):
        return None
    return torch.cat([m.bias if m.bias is not None else torch.zeros(m.out_features, dtype=m.weight.dtype)
                      for m in mods])


def _pair_order(n: int, heads: int) -> torch.Tensor:
    """(n,) the rows of a q or k projection (n = heads x D), per head reordered from HF's halves
    (0..D/2-1 | D/2..D-1) to pairs (0, D/2, 1, D/2 + 1, ...): RoPE then rotates adjacent pairs, a complex
    multiply. q and k get the same order, so q.k is unchanged; v and the output are not reordered."""
    return torch.arange(n).view(heads, 2, n // heads // 2).transpose(1, 2).reshape(n)


def fused_layer(block: Any, pack: bool, heads: int, kv_heads: int, lone_row: bool = True,
                narrow: NarrowPacking | None = None) -> Layer:
    a, m = block.self_attn, block.mlp
    if any(getattr(x, "bias", None) is not None for x in (m.gate_proj, m.up_proj, m.down_proj)):
        raise ValueError("MLP biases are not supported")
    q, k = a.q_proj.out_features, a.k_proj.out_features
    rows = torch.cat([_pair_order(q, heads), q + _pair_order(k, kv_heads),
                      torch.arange(q + k, q + k + a.v_proj.out_features)])    # fused q/k/v rows, q/k interleaved
    qkv = torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])[rows]
    bias = _cat_bias(a.q_proj, a.k_proj, a.v_proj)
    return Layer(norm1=block.input_layernorm.weight,
                 qkv=Dense.of(qkv, None if bias is None else bias[rows], pack, lone_row, narrow),
                 o=Dense.of(a.o_proj.weight, a.o_proj.bias, pack, lone_row, narrow),
                 norm2=block.post_attention_layernorm.weight,
                 gate_up=Dense.of(torch.cat([m.gate_proj.weight, m.up_proj.weight]), None, pack, lone_row, narrow),
                 down=Dense.of(m.down_proj.weight, None, pack, lone_row, narrow))

