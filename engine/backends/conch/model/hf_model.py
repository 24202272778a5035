"""transformers' own model of a config, built on the meta device (no tensor allocated) for a GGUF's loader to
fill (gguf_layers.py), or over a filled gguf_skeleton.py tree's tensors (`over`: the HF forward, prompt
logprobs); transformers' modeling stack is imported by these functions, never at this module's import."""
from __future__ import annotations

from typing import Any

import torch

from conch.engine.backends.conch.model import hf_attention
from conch.engine.backends.conch.model.quantized import QuantEmbedding, QuantizedMatrix, QuantLinear
from conch.engine.weights import gguf_config


def on_meta(config: Any, dtype: torch.dtype) -> Any:
    """transformers' model of `config` (a light one made full: gguf_config.py), its parameters on meta, its
    non-persistent buffers real."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):                           # no tensor allocated
        model = AutoModelForCausalLM.from_config(gguf_config.full(config), dtype=dtype,
                                                 attn_implementation=hf_attention.register())
    _real_buffers(model)
    return model


def _real_buffers(model: Any) -> None:
    """The non-persistent buffers (RoPE's inv_freq, Gemma's embed_scale) made real and initialised by the
    model's own _init_weights, as transformers' from_pretrained does for a model built on meta."""
    owners = {}
    for key, buffer in list(model.named_non_persistent_buffers()):
        owner_name, _, name = key.rpartition(".")
        owner = model.get_submodule(owner_name)
        owner.register_buffer(name, torch.empty_like(buffer, device="cpu"), persistent=False)
        owners[owner_name] = owner
    for owner in owners.values():
        model._init_weights(owner)


def swap_embedding(model: Any, module_name: str, matrix: QuantizedMatrix, dtype: torch.dtype) -> None:
    """The token embedding kept in its blocks (QuantEmbedding: a lookup dequantizes its rows), with the HF
    module's own scale (Gemma's) for the HF forward."""
    parent_name, _, attr = module_name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    scale = getattr(getattr(parent, attr), "embed_scale", None)
    setattr(parent, attr, QuantEmbedding(matrix, dtype, scale))


def over(model: Any) -> Any:
    """transformers' model of a filled skeleton's config over the skeleton's own tensors and quantized modules
    (shared, never copied): the HF forward computes through the same kernels."""
    hf = on_meta(model.config, model.weights_dtype)
    for name, module in model.named_modules():
        if isinstance(module, QuantEmbedding):
            swap_embedding(hf, name, module.matrix, module.dtype)
        elif isinstance(module, QuantLinear):
            hf.set_submodule(name, module)
    for name, parameter in model.named_parameters(remove_duplicate=False):
        owner, _, attr = name.rpartition(".")
        target = hf.get_submodule(owner)
        if not isinstance(target, (QuantLinear, QuantEmbedding)):
            target._parameters[attr] = parameter
    missing = [n for n, p in hf.named_parameters() if p.is_meta]
    if missing:
        raise ValueError(f"the HF model over the skeleton lacks {', '.join(missing[:5])}")
    return hf.eval()
