"""A GGUF model's module tree as the flattened forward (llama.py, weights.py) reads it, built without
transformers' modeling stack: importing it (modeling_utils, the loss and quantizer integrations it pulls in)
takes ~2 s of a server's start, while the flattened runner only reads the modules' tensors, the config and the
rotary table.

`skeleton(config, dtype)`: HF's module tree for the config's model_type (the same module names, classes
nn.Linear / nn.Embedding, parameter shapes; tests/engine/backends/conch/model/test_gguf_skeleton.py checks each
family against transformers' own), its parameters on the meta device for gguf_layers.py to fill, its rotary
embedding real (`Rotary`: transformers' RoPE functions, which need only the config). `SkeletonModel.hf()` is the
HF model over the same tensors, built on first use (prompt logprobs call the model): its modules are the
skeleton's own, so no tensor is held twice.

LAYOUTS: the model types (of gguf_layers.ARCHS) a skeleton is built for, and their modules' differences."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from conch.engine.backends.conch.model import families, hf_model


@dataclass(frozen=True)
class Layout:
    """What a family's HF modules hold beyond Llama's: which projections carry a bias (from its config), which
    extra norms."""
    qkv: Callable[[Any], bool]
    o: Callable[[Any], bool]
    mlp: Callable[[Any], bool] = lambda c: False
    qk_norm: bool = False          # q_norm and k_norm over each head (head_dim,)
    sandwich: bool = False         # pre_feedforward_layernorm and post_feedforward_layernorm (Gemma 3)
    fused: bool = False            # one qkv_proj (rows q | k | v) and one gate_up_proj (gate | up) (Phi-3)


def _attention_bias(c: Any) -> bool:
    return bool(getattr(c, "attention_bias", False))


_LLAMA = Layout(_attention_bias, _attention_bias, lambda c: bool(getattr(c, "mlp_bias", False)))
LAYOUTS: dict[str, Layout] = {
    "llama": _LLAMA, "smollm3": _LLAMA, "granite": _LLAMA,        # SmolLM3, Granite: llama's modules
    "mistral": Layout(lambda c: False, lambda c: False),
    "qwen2": Layout(lambda c: True, lambda c: False),
    "qwen3": Layout(_attention_bias, _attention_bias, qk_norm=True),
    "gemma3_text": Layout(_attention_bias, _attention_bias, qk_norm=True, sandwich=True),
    "phi3": Layout(lambda c: False, lambda c: False, fused=True),
}


@dataclass(frozen=True)
class _Generation:
    """The part of an HF model's generation_config the engine reads (backend.py's end-of-sequence ids)."""
    eos_token_id: Any


class _Norm(nn.Module):
    def __init__(self, size: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(size, dtype=dtype, device="meta"), requires_grad=False)


class _Linear(nn.Linear):
    """An nn.Linear whose parameters stay on meta uninitialised: initialising a meta tensor goes through
    torch's Python references, whose first use imports torch._dynamo (~0.4 s of a load)."""

    def reset_parameters(self) -> None:
        pass


def _linear(inputs: int, outputs: int, bias: bool, dtype: torch.dtype) -> nn.Linear:
    return _Linear(inputs, outputs, bias=bias, dtype=dtype, device="meta")


class _Attention(nn.Module):
    def __init__(self, c: Any, layout: Layout, head_dim: int, dtype: torch.dtype) -> None:
        super().__init__()
        q, kv = c.num_attention_heads * head_dim, c.num_key_value_heads * head_dim
        if layout.fused:
            self.qkv_proj = _linear(c.hidden_size, q + 2 * kv, layout.qkv(c), dtype)
        else:
            self.q_proj = _linear(c.hidden_size, q, layout.qkv(c), dtype)
            self.k_proj = _linear(c.hidden_size, kv, layout.qkv(c), dtype)
            self.v_proj = _linear(c.hidden_size, kv, layout.qkv(c), dtype)
        self.o_proj = _linear(q, c.hidden_size, layout.o(c), dtype)
        if layout.qk_norm:
            self.q_norm, self.k_norm = _Norm(head_dim, dtype), _Norm(head_dim, dtype)


class _Mlp(nn.Module):
    def __init__(self, c: Any, layout: Layout, dtype: torch.dtype) -> None:
        super().__init__()
        bias = layout.mlp(c)
        if layout.fused:
            self.gate_up_proj = _linear(c.hidden_size, 2 * c.intermediate_size, bias, dtype)
        else:
            self.gate_proj = _linear(c.hidden_size, c.intermediate_size, bias, dtype)
            self.up_proj = _linear(c.hidden_size, c.intermediate_size, bias, dtype)
        self.down_proj = _linear(c.intermediate_size, c.hidden_size, bias, dtype)


class _Block(nn.Module):
    def __init__(self, c: Any, layout: Layout, head_dim: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.self_attn = _Attention(c, layout, head_dim, dtype)
        self.mlp = _Mlp(c, layout, dtype)
        self.input_layernorm = _Norm(c.hidden_size, dtype)
        self.post_attention_layernorm = _Norm(c.hidden_size, dtype)
        if layout.sandwich:
            self.pre_feedforward_layernorm = _Norm(c.hidden_size, dtype)
            self.post_feedforward_layernorm = _Norm(c.hidden_size, dtype)


class Rotary(nn.Module):
    """HF's rotary embedding's forward (Llama's, or Gemma 3's by layer type): (x, positions[, kind]) ->
    cos, sin (1, P, D) in x's dtype, each frequency twice ([f | f]) and times the RoPE type's attention
    scaling, from transformers' RoPE functions (modeling_rope_utils: no modeling import)."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        kinds = sorted(set(config.layer_types)) if config.model_type == "gemma3_text" else [None]
        self.tables = {kind: _inv_freq(config, kind) for kind in kinds}

    def forward(self, x: torch.Tensor, positions: torch.Tensor, kind: str | None = None):
        inv_freq, scaling = self.tables[kind]
        freqs = positions[..., None].float() * inv_freq
        angles = torch.cat((freqs, freqs), dim=-1)
        return (angles.cos() * scaling).to(x.dtype), (angles.sin() * scaling).to(x.dtype)


def _inv_freq(config: Any, kind: str | None) -> tuple[torch.Tensor, float]:
    """(D/2,) float32 inverse frequencies and the attention scaling, as HF's rotary module computes them."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = config.rope_parameters if kind is None else config.rope_parameters[kind]
    rope_type = params["rope_type"]
    if rope_type != "default":
        inv_freq, scaling = ROPE_INIT_FUNCTIONS[rope_type](config, None, layer_type=kind)
        return inv_freq.float(), float(scaling)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dim = int(head_dim * params.get("partial_rotary_factor", 1.0))         # Phi-3's partial rotary
    return 1.0 / (params["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)), 1.0


class _Body(nn.Module):
    def __init__(self, c: Any, layout: Layout, dtype: torch.dtype) -> None:
        super().__init__()
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size,        # given its weight: not initialised
                                         _weight=torch.empty(c.vocab_size, c.hidden_size, dtype=dtype, device="meta"),
                                         _freeze=True)
        self.layers = nn.ModuleList(_Block(c, layout, head_dim, dtype) for _ in range(c.num_hidden_layers))
        self.norm = _Norm(c.hidden_size, dtype)
        self.rotary_emb = Rotary(c)


class SkeletonModel(nn.Module):
    """An HF causal LM's module tree (model.embed_tokens, model.layers[i].self_attn.q_proj, ..., lm_head), its
    config, and `hf()`. Calling it runs the HF forward (prompt logprobs: the engine thread's, between steps)."""

    def __init__(self, config: Any, layout: Layout, dtype: torch.dtype) -> None:
        super().__init__()
        self.config = config
        self.weights_dtype = dtype
        self.generation_config = _Generation(getattr(config, "eos_token_id", None))
        self.model = _Body(config, layout, dtype)
        self.lm_head: nn.Module = _linear(config.hidden_size, config.vocab_size, False, dtype)
        self._hf: list[Any] = []            # hf()'s model, once built (a list: not registered as a submodule)
        self._hf_lock = threading.Lock()

    def get_input_embeddings(self) -> nn.Module:
        return self.model.embed_tokens

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head

    def set_output_embeddings(self, module: nn.Module) -> None:
        self.lm_head = module

    def hf(self) -> Any:
        """transformers' model of the config over this skeleton's modules (built once)."""
        with self._hf_lock:
            if not self._hf:
                self._hf.append(hf_model.over(self))
            return self._hf[0]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.hf()(*args, **kwargs)


def skeleton(config: Any, dtype: torch.dtype) -> SkeletonModel | None:
    """The config's module tree, parameters on meta; None for a model type outside LAYOUTS or a config the
    flattened forward does not take (families.py: the HF runner then serves, and needs transformers' model)."""
    layout = LAYOUTS.get(config.model_type)
    if layout is None or not isinstance(families.family(config), families.Family):
        return None
    return SkeletonModel(config, layout, dtype)
