"""Conch's own forward pass for the Llama family (Llama/SmolLM2, Qwen2, Mistral), over a flattened step.

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

from conch.engine.backends.transformers.attention import Attention
from conch.engine.backends.transformers.kernels import Kernels
from conch.engine.backends.transformers.slot_store import SlotKVStore
from conch.engine.backends.transformers.step import Step
from conch.engine.backends.transformers.huge_pages import HugePageArena
from conch.engine.backends.transformers.weights import NarrowPacking, fused_layer, product

SUPPORTED = frozenset({"llama", "qwen2", "mistral"})


def supports(model: Any) -> bool:
    """True for a Llama-family model this forward reproduces (no sliding window in play, SiLU MLP)."""
    c = model.config
    window = getattr(c, "sliding_window", None)
    return (c.model_type in SUPPORTED and getattr(c, "hidden_act", "silu") == "silu"
            and (window is None or not getattr(c, "use_sliding_window", True) or window >= c.max_position_embeddings))


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
        self.heads, self.kv_heads = c.num_attention_heads, c.num_key_value_heads
        self.head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        self.eps = c.rms_norm_eps
        self.dtype = model.lm_head.weight.dtype
        self.embed = model.model.embed_tokens.weight
        self.norm = model.model.norm.weight
        self.kernels = Kernels.load(self.dtype, self.head_dim)
        pack, lone = self.kernels.matmul.pack, not batch_invariant
        narrow = None if self.kernels.narrow is None else NarrowPacking(self.kernels.narrow, HugePageArena())
        self.lm_head = product(model.lm_head.weight, None, pack, lone, narrow)
        self.layers = [fused_layer(b, pack, self.heads, self.kv_heads, lone, narrow) for b in model.model.layers]
        self.rotation = self._rope_table(model, c.max_position_embeddings)
        self.rotation_pairs = torch.view_as_real(self.rotation).contiguous()     # (P, D/2, 2) cos, sin

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
        at = step.positions if self.kernels.fused is not None else self.rotation[step.positions].unsqueeze(1)
        attend = Attention(step, kv, self.heads, self.kv_heads, self.kernels)
        rows = kv.rows(step.slots, step.positions)                      # where this step's K/V go
        h = self._rms(x, self.layers[0].norm1)
        for i, layer in enumerate(self.layers):
            q = self._rope_store(i, layer.qkv(h), at, kv, rows)         # (T, H, D)
            h = self._add_rms(x, layer.o(attend(q, kv.k[i], kv.v[i]).flatten(1)), layer.norm2)
            mlp = layer.down(self._silu_mul(layer.gate_up(h)))
            following = self.layers[i + 1].norm1 if i + 1 < len(self.layers) else self.norm
            h = self._add_rms(x, mlp, following)                         # the next layer's input, or the final norm
        return self.lm_head(h[step.logits_at]).float()

    def _rope_store(self, i: int, qkv: torch.Tensor, at: torch.Tensor, kv: SlotKVStore,
                    rows: torch.Tensor) -> torch.Tensor:
        """qkv (T, (H + 2G) D), q/k in RoPE pairs -> q (T, H, D) rotated; the rotated keys and the values go
        into layer i's store at `rows`. at: the step's positions (the native kernel: one call), or their
        (T, 1, D/2) complex rotations (torch: the same float32 arithmetic in ~10 ops)."""
        if self.kernels.fused is not None:
            return self.kernels.fused.rope_store(qkv, self.rotation_pairs, at, rows, kv.k[i], kv.v[i], kv.blocked)
        T, H, G, D = qkv.shape[0], self.heads, self.kv_heads, self.head_dim
        pairs = qkv[:, :(H + G) * D].float().reshape(T, H + G, D // 2, 2)
        qk = torch.view_as_real(torch.view_as_complex(pairs) * at).view(T, H + G, D).to(self.dtype)
        kv.write(i, rows, qk[:, H:], qkv[:, (H + G) * D:].view(T, G, D))
        return qk[:, :H]
