"""The `ensemble` backend: runs its steps in DAG order, streaming through them (engine/backends/ensemble/run.py).

Named tensors in and out (/v2 infer, generate, gRPC); an ensemble with one LLM step also serves text prompts
as an LLM does (/v1), through engine/backends/ensemble/generation.py."""
from __future__ import annotations

from dataclasses import replace
from typing import AsyncGenerator

from conch.engine.backend import BackendStats, Capabilities
from conch.engine.engine import Engine
from conch.engine.backends.ensemble.generation import TextPipeline, text_plan
from conch.engine.backends.ensemble.graph import plan
from conch.engine.backends.ensemble.run import run_steps
from conch.engine.errors import BackendUnavailable, InvalidRequest, ModelNotFound, ModelNotReady
from conch.engine.loaded_model import LoadedModel
from conch.engine.repository.config import ModelConfig
from conch.engine.repository.specs import EnsembleStep
from conch.engine.tensors.interface import InferRequest, Tensors, check_inputs
from conch.engine.types import GenerationDelta, GenerationRequest


class EnsembleBackend:
    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.inputs, self.outputs = config.inputs, config.outputs
        self.engine: Engine | None = None
        self.order: tuple[EnsembleStep, ...] = ()
        self.text: TextPipeline | None = None   # set when the ensemble can serve text prompts (/v1)
        self.text_refusal = ""

    def bind(self, engine: Engine) -> None:
        self.engine = engine

    async def start(self) -> None:
        if self.engine is None:
            raise BackendUnavailable(f"ensemble '{self.config.name}' needs an engine to run its steps")
        self.order = plan(self.config, self._lookup)
        try:
            self.text = TextPipeline(self.engine, self.config.name, text_plan(self.config, self.order, self._lookup))
        except InvalidRequest as exc:           # a tensor-only ensemble: /v2 infer and gRPC still serve it
            self.text_refusal = exc.message

    @property
    def _engine(self) -> Engine:
        if self.engine is None:
            raise BackendUnavailable(f"ensemble '{self.config.name}' needs an engine to run its steps")
        return self.engine

    def _lookup(self, name: str) -> ModelConfig:
        try:
            return self._engine.get(name).config
        except ModelNotFound:
            return self._engine.repository.config(name)

    async def infer(self, request: InferRequest) -> AsyncGenerator[Tensors, None]:
        check_inputs(self.inputs, request.inputs, self.config.name)
        wanted = {t.name for t in self.outputs}
        async for tensors in run_steps(self._engine, self.order, dict(request.inputs), request):
            yield {k: v for k, v in tensors.items() if k in wanted}

    # -- the Backend protocol: text generation through the LLM step, when the ensemble has one -------------
    def _text(self) -> TextPipeline:
        if self.text is None:
            raise InvalidRequest(f"ensemble '{self.config.name}' cannot generate from a text prompt: "
                                 f"{self.text_refusal}; use /v2 infer or gRPC", param="model")
        return self.text

    def _llm(self) -> LoadedModel:
        step = self._text().plan.llm
        try:
            return self._engine.get(step.model, step.model_version)
        except ModelNotFound:
            raise ModelNotReady(f"ensemble '{self.config.name}': its LLM step '{step.model}' is not loaded") from None

    @property
    def tokenizer(self):
        return self._llm().tokenizer           # the LLM step's: its chat template renders /v1 chat prompts

    @property
    def context_length(self) -> int:
        try:
            return self._llm().context_length
        except (InvalidRequest, ModelNotReady):
            return 0

    @property
    def capabilities(self) -> Capabilities:
        try:
            return replace(self._llm().backend.capabilities, text_prompt=True, text_output=True)
        except (InvalidRequest, ModelNotReady):
            return Capabilities()

    def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationDelta, None]:
        self._llm()
        return self._text().generate(request)

    async def abort(self, request_id: str, index: int | None = None) -> None:
        return None                        # closing generate's stream closes its steps' streams

    def stats(self) -> BackendStats:
        """Nothing of its own: its steps are models of their own, each with its gauges."""
        return BackendStats()

    def health(self) -> bool:
        return bool(self.order)

    async def stop(self) -> None:
        return None
