"""What the vLLM tests share: the environment vLLM-CPU runs under and the engine args that keep startup short.

VLLM_ENV: a small KV budget (GiB) and the OpenMP threads bound to the cores this process may use.
ENGINE_ARGS: eager mode (no torch.compile warmup, which takes minutes on 2 shared cores)."""
from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

HAS_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="vllm is not installed: run in .venv-vllm (make test-vllm)")

_cores = sorted(os.sched_getaffinity(0))
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": f"{_cores[0]}-{_cores[-1]}"}
ENGINE_ARGS = {"enforce_eager": True, "max_model_len": 2048, "max_num_seqs": 16, "dtype": "bfloat16"}


def use_vllm_env() -> None:
    """For an engine started in this process (its engine core process inherits the environment)."""
    for key, value in VLLM_ENV.items():
        os.environ.setdefault(key, value)


@asynccontextmanager
async def started(config: Any) -> AsyncIterator[Any]:
    """The vllm backend of `config`, started under VLLM_ENV, stopped on leaving."""
    from conch.engine.backend import load_backend_class

    use_vllm_env()
    backend = load_backend_class("vllm")(config)
    await backend.start()
    try:
        yield backend
    finally:
        await backend.stop()
