"""Conch's own forward pass for the Llama family (Llama/SmolLM2, Qwen2, Mistral), over a flattened step.

All the step's tokens (decode rows and prefill chunks) go through the projections and the MLP as one (T, hidden)
tensor, with q/k/v and gate/up fused into one matmul each. Attention is per sequence over the SlotKVStore:
decode rows batched in one call over their slots' columns, each prefill chunk alone, causal from the tokens
already stored; in bf16 through Conch's native kernels (native/), else through SDPA. The weights are the
loaded HF modules' own tensors (fused copies of q/k/v and gate/up), so the HF model stays usable (prompt
logprobs).
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any

import torch
import torch.nn.functional as F

from engine.backends.transformers import native
from engine.backends.transformers.kv_store import SlotKVStore

SUPPORTED = frozenset({"llama", "qwen2", "mistral"})


def supports(model: Any) -> bool:
    """True for a Llama-family model this forward reproduces (no sliding window in play, SiLU MLP)."""
    c = model.config
    window = getattr(c, "sliding_window", None)
    return (c.model_type in SUPPORTED and getattr(c, "hidden_act", "silu") == "silu"
            and (window is None or not getattr(c, "use_sliding_window", True) or window >= c.max_position_embeddings))


@dataclass(frozen=True)
class Span:
    slot: int
    start: int        # position of the span's first token (tokens 0..start-1 are in the store)
    offset: int       # index of its first token in the flattened step
    n: int            # tokens this step


@dataclass(frozen=True)
class Step:
    ids: torch.Tensor        # (T,) token ids, spans laid out one after another
    positions: torch.Tensor  # (T,)
    slots: torch.Tensor      # (T,) the slot of each token
    spans: tuple[Span, ...]
    logits_at: torch.Tensor  # (R,) flattened indices whose logits are wanted (each sampling span's last token)


PACK_HINT = 64       # the batch size oneDNN lays packed weights out for; measured best over decode 1..64 here


def _can_pack(dtype: torch.dtype) -> bool:
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        w = torch.ops.mkldnn._reorder_linear_weight(torch.ones(8, 8, dtype=dtype), PACK_HINT)
        torch.ops.mkldnn._linear_pointwise(torch.ones(2, 8, dtype=dtype), w, None, "none", [], "")
        return True
    except (RuntimeError, AttributeError):
        return False


@dataclass(frozen=True)
class _Dense:
    """y = x @ weight.T + bias for x (T, in). The weight is a copy packed once into oneDNN's blocked layout
    where oneDNN takes the dtype (opaque: only `_linear_pointwise` reads it); decode matmuls stream it from
    memory 1.4-1.7x faster than aten's plain (out, in) layout on this CPU, bit for bit equal in bf16."""
    weight: torch.Tensor
    bias: torch.Tensor | None
    packed: bool

    @classmethod
    def of(cls, weight: torch.Tensor, bias: torch.Tensor | None, pack: bool) -> _Dense:
        if pack:
            return cls(torch.ops.mkldnn._reorder_linear_weight(weight.detach(), PACK_HINT), bias, True)
        return cls(weight, bias, False)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed:
            return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")
        return F.linear(x, self.weight, self.bias)


@dataclass(frozen=True)
class _Layer:
    norm1: torch.Tensor
    qkv: _Dense                  # (hidden) -> (q + 2 kv)
    o: _Dense
    norm2: torch.Tensor
    gate_up: _Dense              # (hidden) -> (2 inter)
    down: _Dense


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


def _layer(block: Any, pack: bool, heads: int, kv_heads: int) -> _Layer:
    a, m = block.self_attn, block.mlp
    if any(getattr(x, "bias", None) is not None for x in (m.gate_proj, m.up_proj, m.down_proj)):
        raise ValueError("MLP biases are not supported")
    q, k = a.q_proj.out_features, a.k_proj.out_features
    rows = torch.cat([_pair_order(q, heads), q + _pair_order(k, kv_heads),
                      torch.arange(q + k, q + k + a.v_proj.out_features)])    # fused q/k/v rows, q/k interleaved
    qkv = torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])[rows]
    bias = _cat_bias(a.q_proj, a.k_proj, a.v_proj)
    return _Layer(norm1=block.input_layernorm.weight, qkv=_Dense.of(qkv, None if bias is None else bias[rows], pack),
                  o=_Dense.of(a.o_proj.weight, a.o_proj.bias, pack),
                  norm2=block.post_attention_layernorm.weight,
                  gate_up=_Dense.of(torch.cat([m.gate_proj.weight, m.up_proj.weight]), None, pack),
                  down=_Dense.of(m.down_proj.weight, None, pack))


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


class LlamaForward:
    """Not thread-safe: the engine thread only. Shapes in comments: T tokens, H heads, G kv heads, D head_dim.

    Numerics: RMSNorm rounds as HF's does (native/fused_ops.cpp in bf16, else torch's rms_norm) and RoPE is a
    float32 complex multiply, so logits match HF's forward to rounding (bf16), not bit for bit; batched and
    alone stay bit-equal."""

    @torch.inference_mode()
    def __init__(self, model: Any) -> None:   # an HF Llama-family model
        c = model.config
        self.heads, self.kv_heads = c.num_attention_heads, c.num_key_value_heads
        self.head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        self.eps = c.rms_norm_eps
        self.dtype = model.lm_head.weight.dtype
        self.embed = model.model.embed_tokens.weight
        self.norm = model.model.norm.weight
        pack = _can_pack(self.dtype)
        self.lm_head = _Dense.of(model.lm_head.weight, None, pack)
        self.layers = [_layer(b, pack, self.heads, self.kv_heads) for b in model.model.layers]
        self.rotation = self._rope_table(model, c.max_position_embeddings)
        self.kernels = Kernels.load(self.dtype, self.head_dim)

    def _rope_table(self, model, length: int) -> torch.Tensor:
        """(P, D/2) complex64 cos + i sin for every position, from the model's own rotary embedding (its scaling
        included); HF's (P, D) tables repeat their first half, which this checks."""
        positions = torch.arange(length).unsqueeze(0)
        cos, sin = (t[0].float() for t in model.model.rotary_emb(self.embed[:1].unsqueeze(0).float(), positions))
        half = self.head_dim // 2
        if not (torch.equal(cos[:, :half], cos[:, half:]) and torch.equal(sin[:, :half], sin[:, half:])):
            raise ValueError("the rotary embedding does not rotate (i, i + D/2) pairs")
        return torch.complex(cos[:, :half], sin[:, :half])

    def _rms(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if self.kernels.fused is not None:                              # the same rounding as every other norm
            return self.kernels.fused.add_rms_norm(x, torch.zeros_like(x), weight, self.eps)
        return F.rms_norm(x, (x.shape[-1],), weight, self.eps)

    def _add_rms(self, x: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """x += delta (the residual stream, in place); returns rms_norm(x) * weight."""
        if self.kernels.fused is not None:
            return self.kernels.fused.add_rms_norm(x, delta, weight, self.eps)
        x.add_(delta)
        return self._rms(x, weight)

    def _silu_mul(self, h: torch.Tensor) -> torch.Tensor:
        """(T, 2 inter) [gate | up] -> silu(gate) * up."""
        if self.kernels.fused is not None:
            return self.kernels.fused.silu_mul(h)
        gate, up = h.chunk(2, dim=-1)
        return F.silu(gate) * up

    @torch.inference_mode()
    def __call__(self, step: Step, kv: SlotKVStore) -> torch.Tensor:
        """Logits (R, V) float32 at `step.logits_at`; writes the step's K/V into `kv`."""
        x = self.embed[step.ids]                                         # (T, hidden), the residual stream
        rotation = self.rotation[step.positions].unsqueeze(1)            # (T, 1, D/2) complex
        attend = _Attention(step, kv, self.heads, self.kv_heads, self.kernels)
        rows = kv.rows(step.slots, step.positions)                      # where this step's K/V go
        h = self._rms(x, self.layers[0].norm1)
        for i, layer in enumerate(self.layers):
            h = self._add_rms(x, self._attention(i, layer, h, rotation, kv, rows, attend), layer.norm2)
            mlp = layer.down(self._silu_mul(layer.gate_up(h)))
            following = self.layers[i + 1].norm1 if i + 1 < len(self.layers) else self.norm
            h = self._add_rms(x, mlp, following)                         # the next layer's input, or the final norm
        return self.lm_head(h[step.logits_at]).float()

    def _attention(self, i: int, layer: _Layer, x: torch.Tensor, rotation: torch.Tensor, kv: SlotKVStore,
                   rows: torch.Tensor, attend: _Attention) -> torch.Tensor:
        T, H, G, D = x.shape[0], self.heads, self.kv_heads, self.head_dim
        qkv = layer.qkv(x)                                               # (T, (H + 2G) D), q/k pairs interleaved
        pairs = qkv[:, :(H + G) * D].float().reshape(T, H + G, D // 2, 2)
        qk = torch.view_as_real(torch.view_as_complex(pairs) * rotation).view(T, H + G, D).to(self.dtype)
        kv.write(i, rows, qk[:, H:], qkv[:, (H + G) * D:].view(T, G, D))
        out = attend(qk[:, :H], kv.k[i], kv.v[i])                         # (T, H, D)
        return layer.o(out.reshape(T, H * D))


class _Attention:
    """Per-step attention plan: the decode rows (one token each) batched over a slot range, the prefill
    chunks one by one. Masks are built once per step and reused by every layer.

    GQA without copies: a decode row's H query heads are viewed as (G, H/G) -- G kv heads, each with H/G query
    rows -- so each kv head is read once: by the native kernel (native/decode_attention.cpp, bf16) over each
    row's own columns, or else by one SDPA call over the slot range with a length mask (SDPA's enable_gqa path
    runs ~4x slower on CPU here).
    A prefill chunk goes through native/prefill_attention.cpp (bf16; ~3x SDPA's speed on a long prompt), or
    else SDPA: is_causal when the chunk starts at position 0 (it skips the masked blocks), an explicit mask
    offset by the tokens already stored otherwise."""

    def __init__(self, step: Step, kv: SlotKVStore, heads: int, kv_heads: int, kernels: Kernels) -> None:
        self.gqa = heads != kv_heads
        self.groups = (kv_heads, heads // kv_heads)
        decode = [s for s in step.spans if s.n == 1]
        self.chunks = [s for s in step.spans if s.n > 1]
        self.decode_rows = torch.tensor([s.offset for s in decode], dtype=torch.long)
        self.kernels = kernels
        if decode and kernels.decode is not None:
            self.slots = torch.tensor([s.slot for s in decode], dtype=torch.long)
            self.lengths = torch.tensor([s.start + 1 for s in decode], dtype=torch.long)
        elif decode:
            self.lo = min(s.slot for s in decode)
            hi = max(s.slot for s in decode) + 1
            self.columns = max(s.start for s in decode) + 1
            self.decode_slots = torch.tensor([s.slot - self.lo for s in decode], dtype=torch.long)
            lengths = torch.zeros(hi - self.lo, dtype=torch.long)
            lengths[self.decode_slots] = torch.tensor([s.start + 1 for s in decode])
            self.hi = hi
            # (S, 1, 1, C): slot row sees its own columns 0..len-1; rows of slots not decoding see column 0 only
            self.mask = (torch.arange(self.columns) < lengths.clamp(min=1).unsqueeze(1)).view(hi - self.lo, 1, 1, -1)
        self.causal = [None if s.start == 0 or kernels.prefill is not None else
                       torch.arange(s.start + s.n).unsqueeze(0) <= torch.arange(s.start, s.start + s.n).unsqueeze(1)
                       for s in self.chunks]                          # (n, start + n), None: is_causal or native

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q (T, H, D); k, v the layer's store (slots, G, capacity, D). Returns (T, H, D)."""
        out = q.new_empty(q.shape)
        if len(self.decode_rows) and self.kernels.decode is not None:
            (G, R), D = self.groups, q.shape[2]
            o = self.kernels.decode(q[self.decode_rows].view(-1, G, R, D), k, v, self.slots, self.lengths, D ** -0.5)
            out[self.decode_rows] = o.view(-1, G * R, D)
        elif len(self.decode_rows):
            S, (G, R), D = self.hi - self.lo, self.groups, q.shape[2]
            qs = q.new_zeros((S, G, R, D))
            qs[self.decode_slots] = q[self.decode_rows].view(-1, G, R, D)
            o = F.scaled_dot_product_attention(qs, k[self.lo:self.hi, :, :self.columns],
                                               v[self.lo:self.hi, :, :self.columns], attn_mask=self.mask)
            out[self.decode_rows] = o[self.decode_slots].view(-1, G * R, D)    # (S, G, R, D) -> rows (H, D)
        for s, mask in zip(self.chunks, self.causal, strict=True):
            rows = slice(s.offset, s.offset + s.n)
            if self.kernels.prefill is not None:
                self.kernels.prefill(q[rows], k, v, s.slot, s.start, q.shape[2] ** -0.5, out[rows])
                continue
            qc = q[rows].transpose(0, 1).unsqueeze(0)                        # (1, H, n, D)
            end = s.start + s.n
            o = F.scaled_dot_product_attention(qc, k[s.slot:s.slot + 1, :, :end], v[s.slot:s.slot + 1, :, :end],
                                               attn_mask=mask, is_causal=mask is None, enable_gqa=self.gqa)
            out[rows] = o[0].transpose(0, 1)
        return out
