"""Loads a model folder named by a config: weights, tokenizer, dtype and threads."""
from __future__ import annotations

import os

import torch

from engine.errors import BackendUnavailable, InvalidRequest
from engine.models import ensure_smollm2, ensure_tiny_model
from engine.models.minilm import minilm_path
from engine.repository.config import ModelConfig

_BUILTIN = {"smollm2": ensure_smollm2, "tiny": ensure_tiny_model, "minilm": minilm_path}
_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}


def weights_folder(config: ModelConfig) -> str:
    ref = config.resolve(config.weights)
    if ref is None and config.path is not None:
        ref = str(os.path.join(config.path, config.version))
    if ref is None:
        raise BackendUnavailable(f"model '{config.name}' names no weights")
    if ref.startswith("builtin:"):
        builder = _BUILTIN.get(ref.removeprefix("builtin:"))
        if builder is None:
            raise InvalidRequest(f"model '{config.name}': unknown built-in weights '{ref}'; built-in: "
                                 f"{', '.join('builtin:' + n for n in sorted(_BUILTIN))}", param="weights")
        return str(builder())
    return ref


def load(config: ModelConfig):
    """Returns (model, tokenizer); the model is in eval mode and the config's dtype."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if config.dtype not in _DTYPES:
        raise InvalidRequest(f"model '{config.name}': config key 'dtype' must be one of {sorted(_DTYPES)}",
                             param="dtype")
    torch.set_num_threads(config.num_threads or os.cpu_count() or 1)
    folder = weights_folder(config)
    tokenizer = AutoTokenizer.from_pretrained(config.resolve(config.tokenizer) or folder)
    if config.chat_template:
        tokenizer.chat_template = config.chat_template
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=_DTYPES[config.dtype], attn_implementation="sdpa")
    return model.eval(), tokenizer
