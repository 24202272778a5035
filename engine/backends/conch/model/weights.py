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

from conch.engine.backends.conch.model.families import Family
from conch.engine.backends.conch.kv.huge_pages import HugePageArena
from conch.engine.backends.conch.model.quantized import QuantizedMatrix, QuantLinear, Scaled, Stacked

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
    weight: torch.Tensor        # pack()'s (out, in), in the arena; pack_glu()'s with `activates`
    bias: torch.Tensor | None   # (out,) float32
    activates: bool = False     # an MLP's gate_up whose product is silu(gate) * up (the kernel's matmul_glu)

    @classmethod
    def of(cls, packing: NarrowPacking | None, weight: torch.Tensor, bias: torch.Tensor | None,
           glu: bool = False) -> Narrow | None:
        """`glu`: weight is an MLP's [gate; up] rows and the kernel fuses the SiLU gate (tile_ and
        narrow_matmul.cpp's matmul_glu, I a multiple of 16) where it can: the product then returns silu(gate) * up."""
        if packing is None or weight.dtype != torch.bfloat16 or not packing.kernel.fits(*weight.shape):
            return None
        glu = glu and bias is None and hasattr(packing.kernel, "matmul_glu") and weight.shape[0] % 32 == 0
        pack = packing.kernel.pack_glu if glu else packing.kernel.pack
        packed = packing.arena.copy(pack(weight.detach()))
        return cls(packing.kernel, packed, None if bias is None else bias.detach().float(), glu)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.activates:
            return self.kernel.matmul_glu(x.contiguous(), self.weight)
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
            narrow: NarrowPacking | None = None, glu: bool = False) -> Product:
    """The fastest product for this weight: Narrow where `narrow` is given and takes it, else Dense. `glu`: an
    MLP's [gate; up] whose SiLU gate the product may apply (then its `activates` is True)."""
    fast = Narrow.of(narrow, weight, bias, glu)
    return fast if fast is not None else Dense.of(weight, bias, pack, lone_row)


@dataclass(frozen=True)
class Layer:
    norm1: torch.Tensor         # the attention's input norm (norm_weight's)
    qkv: Product                # (hidden) -> (q + 2 kv)
    o: Product
    norm2: torch.Tensor         # the MLP's input norm
    gate_up: Product            # (hidden) -> (2 inter) [gate | up]; (inter) gated where it `activates` (Narrow)
    down: Product
    q_norm: torch.Tensor | None = None    # (D,) in RoPE pair order (Family.qk_norm)
    k_norm: torch.Tensor | None = None
    post_attn: torch.Tensor | None = None     # norms of the attention's and the MLP's outputs (sandwich_norms)
    post_mlp: torch.Tensor | None = None


@dataclass(frozen=True)
class Shape:
    """What fused_layer needs of the model: heads, kv heads, head_dim D, rotary dims R (pairs reordered)."""
    heads: int
    kv_heads: int
    head_dim: int
    rotary_dims: int


def _bias(m: Any) -> torch.Tensor | None:
    return getattr(m, "bias", None)


def pair_order(n: int, heads: int, rotary: int) -> torch.Tensor:
    """(n,) the rows of a q or k projection (n = heads x D), per head reordered from HF's halves of the first
    R dims (0..R/2-1 | R/2..R-1) to pairs (0, R/2, 1, R/2 + 1, ...), the D - R unrotated dims after them in
    order: RoPE then rotates adjacent pairs, a complex multiply (the unrotated ones by 1). q and k get the same
    order, so q.k is unchanged; v and the output are not reordered."""
    D = n // heads
    head = torch.cat([torch.arange(rotary).view(2, rotary // 2).t().reshape(rotary), torch.arange(rotary, D)])
    return (torch.arange(heads).unsqueeze(1) * D + head).reshape(n)


def qkv_rows(shape: Shape) -> torch.Tensor:
    """(q + 2 kv,) the HF rows of [q; k; v] in the order the forward's fused qkv holds them: q and k in RoPE
    pairs (pair_order), v as it is."""
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    return torch.cat([pair_order(q, shape.heads, shape.rotary_dims),
                      q + pair_order(kv, shape.kv_heads, shape.rotary_dims), torch.arange(q + kv, q + 2 * kv)])


def q_scales(shape: Shape, family: Family) -> torch.Tensor:
    """(q + 2 kv,) float32 each fused qkv row's multiplier: Family.q_scale on q's rows, 1 on k's and v's."""
    scale = torch.ones((shape.heads + 2 * shape.kv_heads) * shape.head_dim, dtype=torch.float32)
    scale[:shape.heads * shape.head_dim] = family.q_scale
    return scale


def _attention_rows(block: Any, fused: bool,
                    shape: Shape) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    """[q, k, v] weights and biases, from separate projections or Phi-3's one qkv_proj (rows q | k | v)."""
    a = block.self_attn
    if not fused:
        mods = (a.q_proj, a.k_proj, a.v_proj)
        return [m.weight for m in mods], [_bias(m) for m in mods]
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    w, b = a.qkv_proj.weight, _bias(a.qkv_proj)
    cuts = [slice(0, q), slice(q, q + kv), slice(q + kv, q + 2 * kv)]
    return [w[c] for c in cuts], [None if b is None else b[c] for c in cuts]


def _mlp_rows(block: Any, fused: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(gate | up weight rows, down weight)."""
    m = block.mlp
    mods = (m.gate_up_proj, m.down_proj) if fused else (m.gate_proj, m.up_proj, m.down_proj)
    if any(_bias(x) is not None for x in mods):
        raise ValueError("MLP biases are not supported")
    if fused:
        return m.gate_up_proj.weight, m.down_proj.weight
    return torch.cat([m.gate_proj.weight, m.up_proj.weight]), m.down_proj.weight


def _cat(parts: list[torch.Tensor | None], weights: list[torch.Tensor]) -> torch.Tensor | None:
    if all(p is None for p in parts):
        return None
    return torch.cat([p if p is not None else torch.zeros(w.shape[0], dtype=w.dtype)
                      for p, w in zip(parts, weights, strict=True)])


def fused_layer(block: Any, pack: bool, shape: Shape, family: Family, lone_row: bool = True,
                narrow: NarrowPacking | None = None) -> Layer:
    """A block's matrices fused and reordered (q/k rows in RoPE pairs), Family's multipliers folded in: q by
    q_scale, o and down by residual_scale."""
    if any(isinstance(mod, QuantLinear) for mod in block.modules()):     # any one: a file may mix types
        return _quantized_layer(block, pack, shape, family, lone_row, narrow)
    a = block.self_attn
    weights, biases = _attention_rows(block, family.fused_qkv, shape)
    rows, scale = qkv_rows(shape), q_scales(shape, family)              # fused q/k/v rows, q/k in pairs
    qkv = (torch.cat(weights)[rows].float() * scale.unsqueeze(1)).to(weights[0].dtype)
    bias = _cat(biases, weights)
    bias = None if bias is None else (bias[rows].float() * scale).to(bias.dtype)
    gate_up, down = _mlp_rows(block, family.fused_qkv)
    return Layer(qkv=product(qkv, bias, pack, lone_row, narrow),
                 o=product(_scaled(a.o_proj.weight, family.residual_scale),
                           None if a.o_proj.bias is None else _scaled(a.o_proj.bias, family.residual_scale),
                           pack, lone_row, narrow),
                 gate_up=product(gate_up, None, pack, lone_row, narrow, glu=family.activation == "silu"),
                 down=product(_scaled(down, family.residual_scale), None, pack, lone_row, narrow),
                 **_norms(block, family, shape))


def _scaled(t: torch.Tensor, by: float) -> torch.Tensor:
    return t if by == 1.0 else (t.float() * by).to(t.dtype)


def head_product(module: Any, pack: bool, lone_row: bool, narrow: NarrowPacking | None) -> Product:
    """A Linear's product: a QuantLinear's own blocks, else weights.py's fastest for its weight."""
    if isinstance(module, QuantLinear):
        return module.matrix if module.bias is None else Stacked((module.matrix,), module.bias)
    return product(module.weight, module.bias, pack, lone_row, narrow)


def _quantized_layer(block: Any, pack: bool, shape: Shape, family: Family, lone_row: bool,
                     narrow: NarrowPacking | None) -> Layer:
    """A block whose matrices stay in a GGUF's blocks (gguf_layers.py): q | k | v and gate | up side by side
    rather than fused (their types may differ), or a file's own fused qkv and gate_up (Phi-3); q/k rows in RoPE
    pairs (a copy of their blocks where gguf_packing.py did not pack them so); Family's q and residual
    multipliers applied to the products' outputs (Granite's: blocks cannot take them folded in)."""
    a, m = block.self_attn, block.mlp
    gate_up: tuple[Any, ...]
    if family.fused_qkv:
        mods, gate_up = [(a.qkv_proj, qkv_rows(shape))], (m.gate_up_proj,)
    else:
        q, k, v = a.q_proj, a.k_proj, a.v_proj
        order = [pair_order(q.out_features, shape.heads, shape.rotary_dims),
                 pair_order(k.out_features, shape.kv_heads, shape.rotary_dims), torch.arange(v.out_features)]
        mods, gate_up = list(zip((q, k, v), order, strict=True)), (m.gate_proj, m.up_proj)
    parts = tuple(_reordered(mod, rows, narrow) if isinstance(mod, QuantLinear) else
                  product(mod.weight[rows], None, pack, lone_row, narrow) for mod, rows in mods)
    biases = [None if mod.bias is None else mod.bias[rows] for mod, rows in mods]
    qkv = Stacked(parts, _cat(biases, [torch.empty(len(r)) for _, r in mods]))
    return Layer(qkv=qkv if family.q_scale == 1.0 else Scaled(qkv, q_scales(shape, family)),
                 o=_times(head_product(a.o_proj, pack, lone_row, narrow), family.residual_scale),
                 gate_up=Stacked(tuple(head_product(mod, pack, lone_row, narrow) for mod in gate_up)),
                 down=_times(head_product(m.down_proj, pack, lone_row, narrow), family.residual_scale),
                 **_norms(block, family, shape))


def _times(product: Product, scale: float) -> Product:
    """The product, its outputs multiplied by `scale` where that is not 1 (quantized.Scaled)."""
    return product if scale == 1.0 else Scaled(product, scale)


def _reordered(module: QuantLinear, rows: torch.Tensor, narrow: NarrowPacking | None) -> QuantizedMatrix:
    """The module's matrix with its rows holding HF's rows `rows`, in order: the matrix itself where it holds
    them so (gguf_packing.py packs q / k so), else a copy (in the forward's huge-page arena where it has one)."""
    held = torch.arange(module.out_features) if module.order is None else module.order
    index = torch.argsort(held)[rows]                 # the matrix's row holding each of `rows`
    if torch.equal(index, torch.arange(len(index))):
        return module.matrix
    return module.matrix.rows(index, None if narrow is None else narrow.arena)


def norm_weight(weight: torch.Tensor, family: Family, scale: float = 1.0) -> torch.Tensor:
    """An RMSNorm's weight as the forward multiplies by it: the module's own tensor, or (Family.norm_offset)
    (1 + w) * scale in float32, the factor Gemma's norms apply."""
    if not family.norm_offset:
        return weight if scale == 1.0 else _scaled(weight, scale)
    return (1.0 + weight.detach().float()) * scale


def _norms(block: Any, family: Family, shape: Shape) -> dict[str, Any]:
    """A block's norm weights by Layer field: input and pre-MLP; q/k (in RoPE pair order, the query scale
    folded into q's); the attention's and the MLP's output norms (sandwich_norms: Gemma's post_attention_layernorm
    is the attention's output norm, and pre_feedforward_layernorm the MLP's input one)."""
    a, sandwich = block.self_attn, family.sandwich_norms
    head = pair_order(shape.head_dim, 1, shape.rotary_dims)
    pre_mlp = block.pre_feedforward_layernorm if sandwich else block.post_attention_layernorm
    return {"norm1": norm_weight(block.input_layernorm.weight, family),
            "norm2": norm_weight(pre_mlp.weight, family),
            "q_norm": norm_weight(a.q_norm.weight, family, family.q_norm_scale)[head] if family.qk_norm else None,
            "k_norm": norm_weight(a.k_norm.weight, family)[head] if family.qk_norm else None,
            "post_attn": norm_weight(block.post_attention_layernorm.weight, family) if sandwich else None,
            "post_mlp": norm_weight(block.post_feedforward_layernorm.weight, family) if sandwich else None}
