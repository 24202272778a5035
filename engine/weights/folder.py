"""The folder a model's config names for its weights: a path (relative to its version folder), the version
folder itself, or one of the server's built-in weights (`builtin:NAME`), built or converted on first use.
Every backend that reads a weights folder (transformers, vllm, tensorrt_llm, embedding, text) asks here."""
from __future__ import annotations

import os

from conch.engine.errors import BackendUnavailable, InvalidRequest
from conch.engine.repository.config import ModelConfig
from conch.engine.weights.minilm import minilm_path
from conch.engine.weights.smollm2 import ensure_smollm2
from conch.engine.weights.tiny import ensure_tiny_model
from conch.engine.weights.tiny_gemma3 import ensure_tiny_gemma3
from conch.engine.weights.tiny_llava import ensure_tiny_llava
from conch.engine.weights.tiny_think import ensure_tiny_think_model

_BUILTIN = {"smollm2": ensure_smollm2, "tiny": ensure_tiny_model, "tiny-think": ensure_tiny_think_model,
            "tiny-llava": ensure_tiny_llava, "tiny-gemma3": ensure_tiny_gemma3,
            "minilm": minilm_path}


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
