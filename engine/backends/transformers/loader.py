"""Loads a model folder named by a config: weights, tokenizer, dtype and threads."""
from __future__ import annotations

import os

import torch

from conch.engine.errors import InvalidRequest
from conch.engine.repository.config import ModelConfig
from conch.engine.weights.folder import weights_folder

_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}


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
