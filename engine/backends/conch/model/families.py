"""The architectures the flattened forward (llama.py) reproduces, each as a `Family`: what sets it apart from
Llama, read once from its HF config. A registry by `model_type` (STYLE: registries, not elif chains); an
architecture outside it, or a config of a listed one that the forward does not reproduce (a sliding window in
play, another activation), gets the reason, and the backend serves it through the HF runner with a warning
naming the slower path.

Gemma 3's sliding-window layers attend through attention.py's windowed path (torch's SDPA over each span's
window, a plain store); its global layers through the kernels as Llama's do.

Folded at load rather than computed per step: Granite's attention and residual multipliers scale the q and the
o / down projections' rows (the attention kernels scale by D^-1/2; a GGUF's quantized matrices take them on
their products' outputs instead, quantized.Scaled), so a step is Llama's arithmetic plus the
embedding scale, the q/k norms, the per-layer RoPE table and the logit scale; Gemma 3's query scale is folded
into its q norm's weight."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Family:
    """How a model differs from Llama's forward. Shapes: D head_dim, R rotary dims (R <= D, even)."""
    name: str
    qk_norm: bool = False            # RMSNorm over each q and k head before RoPE (Qwen3)
    fused_qkv: bool = False          # one qkv_proj and one gate_up_proj module (Phi-3)
    rotary_dims: int | None = None   # R: RoPE on each head's first R dims only (Phi-3's partial rotary); None: D
    rope_layers: tuple[bool, ...] | None = None   # per layer, whether it rotates (SmolLM3's NoPE layers)
    embed_scale: float = 1.0         # the embedding's multiplier (Granite)
    q_scale: float = 1.0             # q's multiplier so that D^-1/2 q.k is the model's score (Granite)
    residual_scale: float = 1.0      # each block's output multiplier before the residual add (Granite)
    logit_scale: float = 1.0         # logits' multiplier (Granite: 1 / logits_scaling)
    rope_length: int | None = None   # positions the RoPE table serves (Phi-3 longrope: its original length)
    windows: tuple[int | None, ...] | None = None   # per layer, its sliding window in tokens, None: global (Gemma 3)
    rope_kinds: tuple[str, ...] | None = None       # per layer, the rotary embedding's layer_type (Gemma 3's two)
    activation: str = "silu"         # the MLP's gate activation: silu, or gelu_tanh (Gemma 3's GeGLU)
    norm_offset: bool = False        # RMSNorm weights are 1 + w, applied in float32 (Gemma 3)
    sandwich_norms: bool = False     # norms after attention and after the MLP too (Gemma 3's four per layer)
    q_norm_scale: float = 1.0        # folded into the q norm, so that D^-1/2 q.k is the score (Gemma 3)
    final_softcap: float | None = None   # logits -> cap tanh(logits / cap) (Gemma 2/3's final soft-capping)


Reader = Callable[[Any], "Family | str"]     # an HF config -> its Family, or why the forward does not take it


def _no_window(c: Any) -> str | None:
    window = getattr(c, "sliding_window", None)
    if window is not None and getattr(c, "use_sliding_window", True) and window < c.max_position_embeddings:
        return f"a sliding window of {window} tokens"
    if getattr(c, "hidden_act", "silu") != "silu":
        return f"activation {c.hidden_act}"
    return None


def _gemma3(c: Any) -> Family | str:
    """Gemma 3's text model: interleaved sliding-window (local) and global layers, each kind with its own RoPE,
    GeGLU, (1 + w) norms before and after attention and the MLP, q/k norms, the embedding scaled by
    hidden^1/2, scores scaled by query_pre_attn_scalar^-1/2."""
    if getattr(c, "attn_logit_softcapping", None) is not None:
        return "attention logit soft-capping"
    if getattr(c, "use_bidirectional_attention", False):
        return "bidirectional attention"
    if c.hidden_activation != "gelu_pytorch_tanh":
        return f"activation {c.hidden_activation}"
    windows = tuple(c.sliding_window if t == "sliding_attention" else None for t in c.layer_types)
    return Family("gemma3", qk_norm=True, embed_scale=c.hidden_size ** 0.5, windows=windows,
                  rope_kinds=tuple(c.layer_types), activation="gelu_tanh", norm_offset=True, sandwich_norms=True,
                  q_norm_scale=(c.head_dim / c.query_pre_attn_scalar) ** 0.5,
                  final_softcap=getattr(c, "final_logit_softcapping", None))


def _llama(c: Any) -> Family | str:
    return _no_window(c) or Family(c.model_type)


def _qwen3(c: Any) -> Family | str:
    return _no_window(c) or Family("qwen3", qk_norm=True)


def _granite(c: Any) -> Family | str:
    head_dim = c.hidden_size // c.num_attention_heads
    return _no_window(c) or Family("granite", embed_scale=c.embedding_multiplier,
                                   q_scale=c.attention_multiplier * head_dim ** 0.5,
                                   residual_scale=c.residual_multiplier, logit_scale=1.0 / c.logits_scaling)


def _smollm3(c: Any) -> Family | str:
    return _no_window(c) or Family("smollm3", rope_layers=tuple(bool(r) for r in c.no_rope_layers))


def _phi3(c: Any) -> Family | str:
    rope = getattr(c, "rope_parameters", None) or {}
    factor = rope.get("partial_rotary_factor", getattr(c, "partial_rotary_factor", None)) or 1.0
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    longrope = rope.get("rope_type") == "longrope"
    return _no_window(c) or Family("phi3", fused_qkv=True, rotary_dims=int(head_dim * factor),
                                   rope_length=c.original_max_position_embeddings if longrope else None)


FAMILIES: dict[str, Reader] = {"llama": _llama, "mistral": _llama, "qwen2": _llama, "qwen3": _qwen3,
                               "granite": _granite, "smollm3": _smollm3, "phi3": _phi3, "gemma3_text": _gemma3}


def family(config: Any) -> Family | str:
    """The model's Family, or why the flattened forward does not serve it."""
    reader = FAMILIES.get(config.model_type)
    if reader is None:
        return f"architecture '{config.model_type}' is not one the flattened runner reproduces " \
               f"({', '.join(sorted(FAMILIES))})"
    return reader(config)
