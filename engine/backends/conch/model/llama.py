"""Conch's own forward pass for the Llama family (Llama/SmolLM2, Qwen2, Mistral and the families.py registry:
Qwen3, Granite, SmolLM3, Phi-3), over a flattened step.

All the step's tokens (decode rows and prefill chunks) go through the projections and the MLP as one (T, hidden)
tensor, with q/k/v and gate/up fused into one matmul each. Attention is per sequence over the SlotKVStore:
decode rows batched in one call over their slots' columns, each prefill chunk alone, causal from the tokens
already stored; in bf16 through Conch's native kernels (native/), else through SDPA. The weights are the
loaded HF modules' own tensors (fused copies of q/k/v and gate/up), so the HF model stays usable (prompt
logprobs).
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from conch.engine.backends.conch.model.attention import Attention
from conch.engine.backends.conch.model.kernels import Kernels
from conch.engine.backends.conch.kv.slot_store import SlotKVStore
from conch.engine.backends.conch.model.step import Step
from conch.engine.backends.conch.kv.huge_pages import HugePageArena
from conch.engine.backends.conch.model.families import Family, family
from conch.engine.backends.conch.model.quantized import embedding_rows
from conch.engine.backends.conch.model.weights import NarrowPacking, Shape, fused_layer, head_product, norm_weight


def supports(model: Any) -> bool:
    """True for a model this forward reproduces (families.py: its Family, no sliding window in play, SiLU)."""
    return isinstance(family(model.config), Family)


class LlamaForward:
    """Not thread-safe: the engine thread only. Shapes in comments: T tokens, H heads, G kv heads, D head_dim.

    Numerics: RMSNorm rounds as HF's does (native/fused_ops.cpp in bf16, else torch's rms_norm) and RoPE is a
    float32 complex multiply (fused_ops.cpp's rope_store in bf16, with the K/V write), so logits match HF's
    forward to rounding (bf16), not bit for bit.

    Batch invariance (by default where the native kernels serve: bf16, head_dim 64/128, AVX512-BF16): a token's
    every value depends on its own id, position and the K/V before it, never on the step it is computed in (a
    decode row alone or among 64, a prefill chunk however cut, beside other requests' chunks, a kept slot's or
    a cached prefix's next token): every matmul's rows are independent (a native kernel path's, amx or avx512,
    matmul_path.py), every token's attention is the prefill kernel's arithmetic over the blocked store
    (attention.py), the norms, SiLU and RoPE are per row (fused_ops.cpp). So greedy decoding gives the same
    tokens whatever the batch and the caches. `batch_invariant` adds oneDNN's lone-row guard for a matrix the
    native kernel does not take (weights.py's Dense); on the onednn and torch paths the rows of a product are
    not independent on every CPU (matmul_path.py), so neither is greedy decoding. Without the
    native prefill kernel (float32, float16, no compiler, head_dim other than 64/128, no AVX512-BF16: SDPA or
    the decode kernel serves) it is not invariant either way."""

    @torch.inference_mode()
    def __init__(self, model: Any, batch_invariant: bool = False) -> None:   # an HF Llama-family model
        c = model.config
        fam = family(c)
        if not isinstance(fam, Family):
            raise ValueError(fam)
        self.family = fam
        self.heads, self.kv_heads = c.num_attention_heads, c.num_key_value_heads
        self.head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        rotary = fam.rotary_dims or self.head_dim
        self.eps = c.rms_norm_eps
        self.embed, self.dtype = embedding_rows(model.model.embed_tokens)     # ids -> (*, hidden)
        self.norm = norm_weight(model.model.norm.weight, fam)
        self.windows = fam.windows or (None,) * c.num_hidden_layers     # per layer, its sliding window or None
        self.kernels = Kernels.load(self.dtype, self.head_dim, windowed=any(w is not None for w in self.windows))
        pack, lone = self.kernels.matmul.pack, not batch_invariant
        narrow = None if self.kernels.narrow is None else NarrowPacking(self.kernels.narrow, HugePageArena())
        self.lm_head = head_product(model.lm_head, pack, lone, narrow)
        shape = Shape(self.heads, self.kv_heads, self.head_dim, rotary)
        self.layers = [fused_layer(b, pack, shape, fam, lone, narrow) for b in model.model.layers]
        self.max_positions = fam.rope_length or c.max_position_embeddings
        self.layer_pairs = self._layer_pairs(model, fam, rotary, len(self.layers))

    def _layer_pairs(self, model, fam: Family, rotary: int, layers: int) -> list[torch.Tensor]:
        """Per layer, its (P, D/2, 2) cos, sin table: one table per kind of layer (Gemma 3: local, global; else
        one), each built once and shared; a NoPE layer's rotates by 1 (built only where the model has one)."""
        kinds = fam.rope_kinds or (None,) * layers
        tables = {k: torch.view_as_real(self._rope_table(model, self.max_positions, rotary, k)).contiguous()
                  for k in dict.fromkeys(kinds)}
        if fam.rope_layers is None or all(fam.rope_layers):
            return [tables[k] for k in kinds]
        plain = torch.zeros(self.max_positions, self.head_dim // 2, 2)
        plain[..., 0] = 1.0
        return [tables[k] if fam.rope_layers[i] else plain for i, k in enumerate(kinds)]

    def _rope_table(self, model, length: int, rotary: int, kind: str | None = None) -> torch.Tensor:
        """(P, D/2) complex64 cos + i sin for every position, from the model's own rotary embedding (its scaling
        included); HF's (P, R) tables repeat their first half, which this checks. Pairs past R/2 rotate by 1.
        kind: the layer type a per-type rotary embedding takes (Gemma 3's)."""
        positions = torch.arange(length).unsqueeze(0)
        x, kinds = self.embed(torch.zeros(1, dtype=torch.long)).unsqueeze(0).float(), () if kind is None else (kind,)
        cos, sin = (t[0].float() for t in model.model.rotary_emb(x, positions, *kinds))
        half = rotary // 2
        if cos.shape[1] != rotary or not (torch.equal(cos[:, :half], cos[:, half:])
                                          and torch.equal(sin[:, :half], sin[:, half:])):
            raise ValueError("the rotary embedding does not rotate (i, i + R/2) pairs")
        pad = self.head_dim // 2 - half
        return torch.complex(F.pad(cos[:, :half], (0, pad), value=1.0), F.pad(sin[:, :half], (0, pad)))

    def _rms(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if self.family.norm_offset:          # Gemma: normed and scaled in float32, rounded once (its RMSNorm)
            return F.rms_norm(x.float(), (x.shape[-1],), weight, self.eps).to(x.dtype)
        if self.kernels.fused is not None:                              # the same rounding as every other norm
            return self.kernels.fused.add_rms_norm(x, torch.zeros_like(x), weight, self.eps)
        return F.rms_norm(x, (x.shape[-1],), weight, self.eps)

    def _add_rms(self, x: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """x += delta (the residual stream, in place); returns rms_norm(x) * weight."""
        if self.kernels.fused is not None and not self.family.norm_offset:
            return self.kernels.fused.add_rms_norm(x, delta, weight, self.eps)
        x.add_(delta)
        return self._rms(x, weight)

    def _mlp_in(self, gate_up: Any, h: torch.Tensor) -> torch.Tensor:
        """(T, hidden) -> the activated (T, inter): one pass where the product applies the gate (weights.py's
        Narrow.activates), else the product then _silu_mul."""
        if getattr(gate_up, "activates", False):
            return gate_up(h)
        return self._silu_mul(gate_up(h))

    def _silu_mul(self, h: torch.Tensor) -> torch.Tensor:
        """(T, 2 inter) [gate | up] -> silu(gate) * up (gelu_tanh(gate) * up: Family.activation)."""
        if self.family.activation == "gelu_tanh":
            gate, up = h.chunk(2, dim=-1)
            return F.gelu(gate, approximate="tanh") * up
        if self.kernels.fused is not None:
            return self.kernels.fused.silu_mul(h)
        gate, up = h.chunk(2, dim=-1)
        return F.silu(gate) * up

    @torch.inference_mode()
    def __call__(self, step: Step, kv: SlotKVStore) -> torch.Tensor:
        """Logits (R, V) float32 at `step.logits_at`; writes the step's K/V into `kv`."""
        x = self.embed(step.ids)                                         # (T, hidden), the residual stream
        if self.family.embed_scale != 1.0:
            x = x * self.family.embed_scale
        if step.embeds is not None:                                      # image tokens: their embeddings as given
            x[step.embeds_at] = step.embeds.to(x.dtype)
        at = step.positions
        attend = Attention(step, kv, self.heads, self.kv_heads, self.kernels)
        rows = kv.rows(step.slots, step.positions)                      # where this step's K/V go
        h = self._rms(x, self.layers[0].norm1)
        for i, layer in enumerate(self.layers):
            q = self._rope_store(i, self._qk_norm(layer, layer.qkv(h)), at, kv, rows)    # (T, H, D)
            o = layer.o(attend(q, kv.k[i], kv.v[i], self.windows[i]).flatten(1))
            h = self._add_rms(x, self._post_norm(o, layer.post_attn), layer.norm2)
            mlp = layer.down(self._mlp_in(layer.gate_up, h))
            following = self.layers[i + 1].norm1 if i + 1 < len(self.layers) else self.norm
            h = self._add_rms(x, self._post_norm(mlp, layer.post_mlp), following)   # the next input, or the final norm
        logits = self.lm_head(h[step.logits_at]).float()
        if self.family.final_softcap is not None:
            logits = torch.tanh(logits / self.family.final_softcap) * self.family.final_softcap
        return logits if self.family.logit_scale == 1.0 else logits * self.family.logit_scale

    def _post_norm(self, out: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
        """An attention's or MLP's output normed before the residual add (Family.sandwich_norms), else as it is."""
        return out if weight is None else self._rms(out, weight)

    def _qk_norm(self, layer, qkv: torch.Tensor) -> torch.Tensor:
        """qkv (T, (H + 2G) D) with each q and k head RMS-normed in place (Family.qk_norm), else as it is."""
        if layer.q_norm is None:
            return qkv
        T, H, G, D = qkv.shape[0], self.heads, self.kv_heads, self.head_dim
        fused = self.kernels.fused
        if fused is not None and qkv.dtype == layer.q_norm.dtype == layer.k_norm.dtype == torch.bfloat16 \
                and qkv.is_contiguous():                                # one call each, HF's RMSNorm rounding
            fused.head_rms_norm(qkv, 0, H, D, layer.q_norm, self.eps)
            fused.head_rms_norm(qkv, H, G, D, layer.k_norm, self.eps)
            return qkv
        q, k = qkv[:, :H * D].view(T, H, D), qkv[:, H * D:(H + G) * D].view(T, G, D)
        q.copy_(F.rms_norm(q.to(layer.q_norm.dtype), (D,), layer.q_norm, self.eps))   # float32 weights: Gemma's
        k.copy_(F.rms_norm(k.to(layer.k_norm.dtype), (D,), layer.k_norm, self.eps))
        return qkv

    def _rope_store(self, i: int, qkv: torch.Tensor, at: torch.Tensor, kv: SlotKVStore,
                    rows: torch.Tensor) -> torch.Tensor:
        """qkv (T, (H + 2G) D), q/k in RoPE pairs -> q (T, H, D) rotated; the rotated keys and the values go
        into layer i's store at `rows`. at: the step's positions; the native kernel rotates in one call, torch
        by the same float32 complex multiply in ~10 ops."""
        if self.kernels.fused is not None:
            return self.kernels.fused.rope_store(qkv, self.layer_pairs[i], at, rows, kv.k[i], kv.v[i], kv.blocked)
        T, H, G, D = qkv.shape[0], self.heads, self.kv_heads, self.head_dim
        pairs = qkv[:, :(H + G) * D].float().reshape(T, H + G, D // 2, 2)
        turn = torch.view_as_complex(self.layer_pairs[i][at]).unsqueeze(1)         # (T, 1, D/2)
        qk = torch.view_as_real(torch.view_as_complex(pairs) * turn).view(T, H + G, D).to(self.dtype)
        kv.write(i, rows, qk[:, H:], qkv[:, (H + G) * D:].view(T, G, D))
        return qk[:, :H]
