"""The Llama family's weights as the flattened forward reads them: q/k/v and gate/up fused into one matrix
each (q/k rows reordered into RoPE pairs), each matrix behind the fastest product this machine has for it
(`product`): the kernel path's native kernel (matmul_path.py: tile_matmul.cpp with AMX, narrow_matmul.cpp with
AVX512-BF16, bf16 only) over a copy in its layout and in huge pages, else oneDNN over a copy packed into its
blocked layout, else aten over the tensor itself. The HF modules keep their own tensors, so the HF model stays
usable (prompt logprobs).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F

from conch.engine.backends.transformers.huge_pages import HugePageArena

PACK_HINT = 64       # the batch size oneDNN lays packed weights out for; measured best over decode 1..64 here


class Product(Protocol):
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x (T, in) -> x @ weight.T + bias (T, out), in the weight's dtype."""
        ...


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
    """How native copies are made: the path's kernel's layout (tile_ or narrow_matmul.cpp), in huge pages."""
    kernel: Any                 # the compiled module
    arena: HugePageArena


@dataclass(frozen=True)
class Narrow:
    """A weight's copy in a native kernel's layout (tile_matmul.cpp or narrow_matmul.cpp), in huge pages (a decode
    step streams every weight once; huge pages spare the TLB misses). Its rows are independent by construction
    (each output one float32 sum in a fixed order): batch-invariant whatever the product's size."""
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
    """y = x @ weight.T + bias through oneDNN or aten, where the narrow kernel does not serve. The weight is a
    copy packed once into oneDNN's blocked layout where oneDNN takes the dtype (opaque: only
    `_linear_pointwise` reads it), which decode matmuls stream faster than aten's plain (out, in) layout.

    Batch invariance (`lone_row` False): oneDNN computes a lone row (x of shape (1, in)) through another
    reduction order than any x of 2 rows or more when in > 1024 (the last bf16 bit of ~15% of SmolLM2's down
    projection rows differs), while every x of 2..2100 rows gives each row the same bits (measured, 1 and 2
    threads, a CPU without AMX). So a lone row is computed beside a zero row. With AMX oneDNN takes other orders
    still (rows 33..63 of a product among them; matmul_path.py): there no guard makes its rows independent."""
    weight: torch.Tensor
    bias: torch.Tensor | None
    packed: bool
    lone_row: bool = True       # False: never run a (1, in) product (batch-invariant)

    @classmethod
    def of(cls, weight: torch.Tensor, bias: torch.Tensor | None, pack: bool, lone_row: bool = True) -> Dense:
        if pack:
            return cls(torch.ops.mkldnn._reorder_linear_weight(weight.detach(), PACK_HINT), bias, True, lone_row)
        return cls(weight, bias, False, lone_row)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] == 1 and not self.lone_row:
            return self._product(torch.cat([x, torch.zeros_like(x)]))[:1]
        return self._product(x)

    def _product(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed:
            return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")
        return F.linear(x, self.weight, self.bias)


def product(weight: torch.Tensor, bias: torch.Tensor | None, pack: bool, lone_row: bool = True,
            narrow: NarrowPacking | None = None) -> Product:
    """The fastest product for this weight: Narrow where `narrow` is given and takes it, else Dense."""
    fast = Narrow.of(narrow, weight, bias)
    return fast if fast is not None else Dense.of(weight, bias, pack, lone_row)


@dataclass(frozen=True)
class Layer:
    norm1: torch.Tensor
    qkv: Product                # (hidden) -> (q + 2 kv)
    o: Product
    norm2: torch.Tensor
    gate_up: Product            # (hidden) -> (2 inter)
    down: Product


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
                 qkv=product(qkv, None if bias is None else bias[rows], pack, lone_row, narrow),
                 o=product(a.o_proj.weight, a.o_proj.bias, pack, lone_row, narrow),
                 norm2=block.post_attention_layernorm.weight,
                 gate_up=product(torch.cat([m.gate_proj.weight, m.up_proj.weight]), None, pack, lone_row, narrow),
                 down=product(m.down_proj.weight, None, pack, lone_row, narrow))

