"""A tensor model's requests traced as `Engine.generate` traces an LLM's: each request (a /v2 or gRPC infer, an
ensemble step, a BLS call) gets a `Trace` that the engine's observers (metrics, Triton statistics) receive once
it is over, with the backend's measured queue, input and output times (`InferTiming`) and its batch size."""
from __future__ import annotations

from contextlib import aclosing
from dataclasses import replace
from typing import AsyncGenerator

from conch.engine.admission import Trace
from conch.engine.backend import TensorModel
from conch.engine.engine import Engine, tracked
from conch.engine.errors import InvalidRequest
from conch.engine.loaded_model import LoadedModel
from conch.engine.repository.specs import TensorSpec
from conch.engine.tensors.interface import InferRequest, InferTiming, Tensors
from conch.engine.types import GenerationRequest


class TracedTensorModel:
    def __init__(self, engine: Engine, model: LoadedModel, backend: TensorModel) -> None:
        self.engine, self.model, self.backend = engine, model, backend
        self.inputs: tuple[TensorSpec, ...] = backend.inputs
        self.outputs: tuple[TensorSpec, ...] = backend.outputs

    async def infer(self, request: InferRequest) -> AsyncGenerator[Tensors, None]:
        if self.model.config.sequence_batching is None:
            _refuse_sequence_controls(self.model.name, request.parameters)
        request = replace(request, timing=InferTiming())
        trace = Trace(GenerationRequest(id=request.id, model=self.model.name), self.model.config.version)
        with tracked(self.model, trace, self.engine.observers):
            try:
                async with aclosing(self.backend.infer(request)) as responses:
                    async for outputs in responses:
                        yield outputs
                trace.finished = 1
            finally:
                timing = request.timing
                trace.queued, trace.batch_size = timing.queue, timing.batch_size
                trace.compute_input, trace.compute_output = timing.compute_input, timing.compute_output


def _refuse_sequence_controls(model: str, parameters: dict) -> None:
    """Starting or ending a sequence needs the model's sequence_batching; a bare `sequence_id` is only a
    correlation id (a python model reads it as such)."""
    for key in ("sequence_start", "sequence_end"):
        if parameters.get(key) in (True, "true", 1):
            raise InvalidRequest(f"parameter '{key}': model '{model}' has no sequence_batching", param=key)
