"""The engine: the repository's loaded models and the one entry point for generation."""
from __future__ import annotations

import asyncio
import logging
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import AsyncIterator

from engine.admission import Admission, Observer, Trace
from engine.backend import Backend, load_backend_class
from engine.cache import ResponseCache
from engine.errors import InvalidRequest, ModelNotFound, ModelNotReady
from engine.repository import ModelConfig, ModelRepository
from engine.types import GenerationDelta, GenerationRequest

log = logging.getLogger(__name__)


@dataclass
class LoadedModel:
    config: ModelConfig
    backend: Backend
    inflight: int = 0     # requests between Engine.generate's start and end; unload waits for them

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def tokenizer(self):
        tokenizer = self.backend.tokenizer
        if tokenizer is None:                 # a python, tokenizer-less or tensor-only model
            raise InvalidRequest(f"model '{self.name}' ({self.config.backend} backend) does not generate text "
                                 f"from a prompt; use /v2 infer or gRPC", param="model")
        return tokenizer

    @property
    def context_length(self) -> int:
        return self.backend.context_length


class Engine:
    def __init__(self, repository: ModelRepository | None = None, cache: ResponseCache | None = None,
                 max_queue_size: int | None = None) -> None:
        self.repository = repository or ModelRepository()
        self.cache = cache                           # None: no response cache
        self.admission = Admission(max_queue_size)   # a bounded priority queue per model
        self.observers: list[Observer] = []          # told about every request once it is over
        self._models: dict[str, LoadedModel] = {}
        self._loading: dict[str, asyncio.Lock] = {}

    async def start(self, names: list[str] | None = None) -> None:
        for name in names if names is not None else self.repository.names():
            await self.load(name)

    async def stop(self) -> None:
        for name in list(self._models):
            await self.unload(name)

    async def load(self, name: str, config: ModelConfig | None = None) -> LoadedModel:
        lock = self._loading.setdefault(name, asyncio.Lock())
        async with lock:
            config = config or self.repository.config(name)
            backend = load_backend_class(config.backend)(config)
            if hasattr(backend, "bind"):          # ensembles resolve their steps through the engine
                backend.bind(self)
            await backend.start()                 # a failure leaves the serving version in place
            old = self._models.get(name)
            self._models[name] = LoadedModel(config, backend)
            if old is not None:
                await _retire(old)
            log.info("model %s ready (backend %s)", name, config.backend)
            return self._models[name]

    async def unload(self, name: str) -> None:
        model = self._models.pop(name, None)
        if model is None:
            raise ModelNotFound(f"model '{name}' is not loaded")
        await _retire(model)

    def models(self) -> list[LoadedModel]:
        return [self._models[n] for n in sorted(self._models)]

    def get(self, name: str) -> LoadedModel:
        model = self._models.get(name)
        if model is None:
            if name in self._loading and self._loading[name].locked():
                raise ModelNotReady(f"model '{name}' is loading")
            raise ModelNotFound(f"The model '{name}' does not exist", param="model")
        return model

    def prepare(self, request: GenerationRequest, prompt_param: str = "prompt") -> GenerationRequest:
        """Tokenize and check the request against the model; raises InvalidRequest naming the field."""
        model = self.get(request.model)
        ids = request.prompt_token_ids
        if ids is None:
            ids = tuple(model.tokenizer.encode(request.prompt or "", add_special_tokens=request.add_special_tokens))
        if not ids:
            raise InvalidRequest("the prompt is empty", param=prompt_param)
        if model.backend.capabilities.text_prompt:   # its own steps change the text, then tokenize and check it
            return replace(request, prompt_token_ids=ids)
        limit, params = model.context_length, request.params
        if len(ids) >= limit:
            raise InvalidRequest(
                f"This model's maximum context length is {limit} tokens. However, your prompt has "
                f"{len(ids)} tokens. Please reduce the length of the prompt.", param=prompt_param)
        if params.max_tokens is None:
            params = replace(params, max_tokens=limit - len(ids))
        if len(ids) + params.max_tokens > limit:
            raise InvalidRequest(
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{len(ids) + params.max_tokens} tokens ({len(ids)} in the prompt, {params.max_tokens} in the "
                f"completion). Please reduce the prompt or max_tokens.", param=prompt_param)
        return replace(request, prompt_token_ids=ids, params=params)

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationDelta]:
        """Deltas of every choice of the request, interleaved; each choice ends with a finished delta."""
        request = self.prepare(request)
        model = self.get(request.model)
        trace, failure = Trace(request, request.version or model.config.version), None
        model.inflight += 1
        try:
            async with aclosing(self._answer(model, request, trace)) as deltas:
                async for delta in deltas:
                    trace.observe(delta)
                    yield delta
        except BaseException as exc:
            failure = exc
            raise
        finally:
            model.inflight -= 1
            trace.close(failure)
            for observer in self.observers:
                observer.on_finish(trace)

    async def _answer(self, model: LoadedModel, request: GenerationRequest,
                      trace: Trace) -> AsyncIterator[GenerationDelta]:
        """A cache hit replays its stored deltas; a miss waits for a slot, runs the backend, is stored."""
        cache = self.cache if self.cache is not None and ResponseCache.applies(model.config, request) else None
        if cache is not None:
            hit = await cache.get(model.config, request)
            trace.cache_hit = hit is not None
            if hit is not None:
                for delta in hit:
                    yield delta
                return
        recorded: list[GenerationDelta] = []
        async with self.admission.queue(model.config).slot(request, trace):
            async with aclosing(model.backend.generate(request)) as deltas:
                async for delta in deltas:
                    if cache is not None:
                        recorded.append(delta)
                    yield delta
        if cache is not None:
            cache.put(model.config, request, recorded)


async def _retire(model: LoadedModel, timeout: float = 600.0) -> None:
    """Stop a model no longer served once its in-flight requests have finished."""
    deadline = asyncio.get_running_loop().time() + timeout
    while model.inflight > 0 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.02)
    await model.backend.stop()
