"""Runs a model's `model_warmup` samples (engine/repository/warmup.py) through its tensor interface, once it
is loaded and before model control reports it ready; a sample that fails fails the load."""
from __future__ import annotations

import asyncio

from conch.engine.engine import Engine
from conch.engine.errors import BackendUnavailable, EngineError
from conch.engine.loaded_model import LoadedModel
from conch.engine.tensors.contract import batches
from conch.engine.tensors.interface import InferRequest
from conch.engine.tensors.llm import tensor_model
from conch.engine.tensors.traced import TracedTensorModel


async def warm_up(engine: Engine, loaded: LoadedModel) -> int:
    """Runs every sample `count` times; returns the runs made."""
    config, runs = loaded.config, 0
    if not config.model_warmup:
        return 0
    model = tensor_model(engine, config.name, config.version)
    if isinstance(model, TracedTensorModel):      # warmup is not counted in the statistics (as in Triton)
        model = model.backend
    for sample in config.model_warmup:
        tensors = await asyncio.to_thread(sample.tensors, batches(config), config.version_dir.parent
                                          if config.version_dir is not None else None)
        for run in range(sample.count):
            request = InferRequest(f"warmup-{sample.name}-{run}", dict(tensors))
            try:
                async for _ in model.infer(request):
                    pass
            except EngineError as exc:
                raise BackendUnavailable(f"model '{config.name}': warmup sample '{sample.name}' failed: "
                                         f"{getattr(exc, 'message', exc)}") from exc
            runs += 1
    return runs
