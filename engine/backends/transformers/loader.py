"""Loads the model a config names: an HF folder or a GGUF file (engine/weights/gguf_file.py), with its
tokenizer, its chat template (the config's, else the model's own), its generation defaults, dtype and threads."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from conch.engine.errors import InvalidRequest
from conch.engine.params.model_defaults import GenerationDefaults
from conch.engine.repository.config import ModelConfig
from conch.engine.weights.folder import weights_folder
from conch.engine.weights.gguf_file import load_gguf, read_gguf
from conch.engine.weights.model_files import generation_defaults, is_gguf

_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}


@dataclass(frozen=True)
class Loaded:
    model: Any                  # an HF causal LM in eval mode, in the config's dtype
    tokenizer: Any
    defaults: GenerationDefaults


def load(config: ModelConfig) -> Loaded:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if config.dtype not in _DTYPES:
        raise InvalidRequest(f"model '{config.name}': config key 'dtype' must be one of {sorted(_DTYPES)}",
                             param="dtype")
    torch.set_num_threads(config.num_threads or os.cpu_count() or 1)
    ref, dtype = weights_folder(config), _DTYPES[config.dtype]
    if is_gguf(ref):
        model, tokenizer = load_gguf(read_gguf(Path(ref)), dtype, config.resolve(config.tokenizer))
    else:
        tokenizer = AutoTokenizer.from_pretrained(config.resolve(config.tokenizer) or ref)
        model = AutoModelForCausalLM.from_pretrained(ref, dtype=dtype, attn_implementation="sdpa")
    if config.chat_template:
        tokenizer.chat_template = config.chat_template
    return Loaded(model.eval(), tokenizer, generation_defaults(ref))
