"""The `ensemble` backend: runs its steps in DAG order, streaming through them.

A step that answers many times (the LLM when streaming) runs every later step once per answer, as
Triton's decoupled ensembles do, so a streamed ensemble streams end to end."""
from __future__ import annotations

from typing import TYPE_CHECKING, AsyncIterator

from engine.backend import Capabilities
from engine.ensemble.contract import tensor_model
from engine.ensemble.graph import plan
from engine.ensemble.tensors import InferRequest, Tensors, check_inputs
from engine.errors import BackendUnavailable, InvalidRequest, ModelNotFound
from engine.repository.config import ModelConfig
from engine.repository.specs import EnsembleStep

if TYPE_CHECKING:
    from engine.engine import Engine


class EnsembleBackend:
    capabilities = Capabilities()

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.inputs, self.outputs = config.inputs, config.outputs
        self.engine: Engine | None = None
        self.order: tuple[EnsembleStep, ...] = ()

    def bind(self, engine: "Engine") -> None:
        self.engine = engine

    async def start(self) -> None:
        if self.engine is None:
            raise BackendUnavailable(f"ensemble '{self.config.name}' needs an engine to run its steps")
        self.order = plan(self.config, self._lookup)

    def _lookup(self, name: str) -> ModelConfig:
        try:
            return self.engine.get(name).config
        except ModelNotFound:
            return self.engine.repository.config(name)

    async def infer(self, request: InferRequest) -> AsyncIterator[Tensors]:
        check_inputs(self.inputs, request.inputs, self.config.name)
        wanted = {t.name for t in self.outputs}
        async for tensors in self._run(0, dict(request.inputs), request):
            yield {k: v for k, v in tensors.items() if k in wanted}

    async def _run(self, index: int, tensors: Tensors, request: InferRequest) -> AsyncIterator[Tensors]:
        if index == len(self.order):
            yield tensors
            return
        step = self.order[index]
        inputs = {key: tensors[t] for key, t in step.input_map if t in tensors}
        model = tensor_model(self.engine, step.model)
        sub = InferRequest(f"{request.id}/{index}", inputs, request.parameters)
        responses = model.infer(sub)
        try:
            async for outputs in responses:
                produced = {t: outputs[key] for key, t in step.output_map if key in outputs}
                async for result in self._run(index + 1, {**tensors, **produced}, request):
                    yield result
        finally:
            await responses.aclose()

    # -- the Backend protocol: an ensemble answers tensors, not GenerationRequests ----------------------
    @property
    def tokenizer(self):
        return None

    context_length = 0

    def generate(self, request):
        raise InvalidRequest(f"model '{self.config.name}' is an ensemble: use /v2 infer, generate or gRPC")

    async def abort(self, request_id: str) -> None:
        return None

    def health(self) -> bool:
        return bool(self.order)

    async def stop(self) -> None:
        return None
