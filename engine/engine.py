"""The engine: the repository's loaded models and the one entry point for generation."""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
import weakref
from contextlib import aclosing, contextmanager
from dataclasses import replace
from contextvars import ContextVar
from typing import AsyncGenerator, Awaitable, Callable, Iterator, Protocol, runtime_checkable

from conch.engine.admission import Admission, Observer, Trace
from conch.engine.backend import BackendFactory, CompletesConfig, LLMBackend, load_backend_class
from conch.engine.response_cache import ResponseCache
from conch.engine.errors import EngineError, InvalidRequest, ModelNotFound, ModelNotReady
from conch.engine.loaded_model import LoadedModel
from conch.engine.pipeline import detokenize, tokenize
from conch.engine.pipeline.tokenize import tokenizes_inline
from conch.engine.repository import ModelConfig, ModelRepository
from conch.engine.repository.specs import EnsembleStep
from conch.engine.resources import ResourceLimiter
from conch.engine.params import checked_sampling
from conch.engine.types import GenerationDelta, GenerationRequest

log = logging.getLogger(__name__)

Warmup = Callable[["Engine", LoadedModel], Awaitable[object]]   # runs a loaded version's warmup (model control's)
# The version whose warmup this task runs: `get` hands it to the warmup's own requests, and to no one else.
_WARMING: ContextVar[LoadedModel | None] = ContextVar("warming", default=None)


@runtime_checkable
class EngineBound(Protocol):
    """A backend role: it resolves other models through the engine (ensembles, upstream fallbacks); the engine
    calls `bind` once, before `start`. Declared here, beside the Engine it receives, so that engine/backend.py
    needs nothing above it."""

    def bind(self, engine: Engine) -> None: ...


class Engine:
    def __init__(self, repository: ModelRepository | None = None, cache: ResponseCache | None = None,
                 max_queue_size: int | None = None, backends: BackendFactory | None = None) -> None:
        self.repository = repository or ModelRepository()
        self.backends = backends                     # config -> Backend; None: the registry, by config.backend
        self.cache = cache                           # None: no response cache
        self.admission = Admission(max_queue_size)   # a bounded priority queue per model
        self.observers: list[Observer] = []          # told about every request once it is over
        self.resources = ResourceLimiter()           # Triton's rate limiter: resources instances execute with
        self._models: dict[str, dict[str, LoadedModel]] = {}   # name -> version -> the model serving it
        self._loading: dict[str, asyncio.Lock] = {}
        self._keys = itertools.count()               # engine keys: see generate
        # id -> a request prepare returned, while it lives: generate does not prepare that one again
        self._prepared: weakref.WeakValueDictionary[int, GenerationRequest] = weakref.WeakValueDictionary()

    async def start(self, names: list[str] | None = None) -> None:
        for name in names if names is not None else self.repository.names():
            await self.load(name)

    async def stop(self) -> None:
        for name in list(self._models):
            await self.unload(name)

    async def load(self, name: str, config: ModelConfig | None = None, warm: Warmup | None = None) -> LoadedModel:
        """Bring up one version (config.version) of a model; the other versions it serves are untouched.
        Invariant: a version is registered (reachable by `get`, so by every face) only once `warm` has run on
        it; while it runs only the warmup's own requests reach it (`_WARMING`), and a failure stops it."""
        lock = self._loading.setdefault(name, asyncio.Lock())
        async with lock:
            config = config or self.repository.config(name)
            backend = (self.backends or load_backend_class(config.backend))(config)
            if isinstance(backend, EngineBound):  # ensembles resolve their steps through the engine
                backend.bind(self)
            await backend.start()                 # a failure leaves the serving version in place
            if isinstance(backend, CompletesConfig):
                config = backend.completed_config
            loaded = LoadedModel(config, backend)
            if warm is not None:
                await self._warm(loaded, warm)
            versions = self._models.setdefault(name, {})
            old = versions.get(config.version)
            versions[config.version] = loaded
            self._models[name] = dict(sorted(versions.items(), key=lambda kv: _version_key(kv[0])))
            if old is not None:
                await _retire(old)
            log.info("model %s version %s ready (backend %s)", name, config.version, config.backend)
            return loaded

    async def _warm(self, loaded: LoadedModel, warm: Warmup) -> None:
        token = _WARMING.set(loaded)
        try:
            await warm(self, loaded)
        except BaseException:
            await loaded.backend.stop()
            raise
        finally:
            _WARMING.reset(token)

    async def unload(self, name: str, version: str | None = None) -> None:
        """Stop serving one version of a model, or (version None) all of them."""
        versions = self._models.get(name, {})
        if not versions or (version is not None and version not in versions):
            raise ModelNotFound(f"model '{name}'{f' version {version}' if version else ''} is not loaded")
        retired = [versions.pop(version)] if version is not None else list(versions.values())
        if version is None or not versions:
            self._models.pop(name, None)
        for model in retired:
            await _retire(model)

    def models(self) -> list[LoadedModel]:
        """The newest loaded version of every model (what a request naming no version gets)."""
        return [list(self._models[n].values())[-1] for n in sorted(self._models)]

    def all_versions(self) -> list[LoadedModel]:
        """Every loaded (model, version), by name then version."""
        return [m for n in sorted(self._models) for m in self._models[n].values()]

    def versions(self, name: str) -> list[str]:
        """The loaded versions of a model, ascending."""
        return list(self._models.get(name, {}))

    def get(self, name: str, version: str | None = None) -> LoadedModel:
        """The model serving `version` of `name` (None or "": the newest loaded); ModelNotReady while the model
        loads or warms up (only its warmup's own requests reach a warming version)."""
        warming = _WARMING.get()
        if warming is not None and warming.name == name and version in (None, "", warming.config.version):
            return warming
        versions = self._models.get(name)
        if not versions:
            if name in self._loading and self._loading[name].locked():
                raise ModelNotReady(f"model '{name}' is loading (or warming up)")
            raise ModelNotFound(f"The model '{name}' does not exist", param="model")
        if not version:
            return list(versions.values())[-1]
        model = versions.get(version)
        if model is None:
            if self._loading[name].locked():
                raise ModelNotReady(f"model '{name}' version {version} is loading (or warming up)")
            raise ModelNotFound(f"model '{name}' has no version '{version}' ready "
                                f"(serving version(s) {', '.join(versions)})", param="model")
        return model

    def ready(self, name: str | None = None, version: str | None = None) -> bool:
        """The one readiness question every face asks (/v1 through `get`, /health, /v2's ready endpoints,
        gRPC's ServerReady and ModelReady). A model (version) is ready when it is registered -- loaded and
        warmed up -- its backend is healthy and, for an ensemble, every step is served. The server is ready
        when no model is loading and every loaded version is ready (none loaded: ready, as Triton's)."""
        if name is None:
            loading = any(lock.locked() for lock in self._loading.values())
            return not loading and all(self.ready(m.name, m.config.version) for m in self.all_versions())
        try:
            model = self.get(name, version)
        except EngineError:
            return False
        return model.backend.health() and not self.missing_steps(name)

    def missing_steps(self, name: str) -> list[str]:
        """The steps of a loaded ensemble that no model serves now (the ensemble is unavailable meanwhile)."""
        if not self.versions(name):
            return []
        return sorted({step.model for step in self.get(name).config.steps if not self._serves(step)})

    def _serves(self, step: EnsembleStep) -> bool:
        versions = self.versions(step.model)
        return bool(versions) and (step.model_version is None or step.model_version in versions)

    async def prepare(self, request: GenerationRequest, prompt_param: str = "prompt") -> GenerationRequest:
        """Sampling checked (engine/params/sampling.py), then the pipeline's tokenize step
        (engine/pipeline/tokenize.py), in a worker thread unless the prompt is short; raises InvalidRequest
        naming the field. generate takes the very request it returns as it is (a copy with any change is
        prepared again)."""
        model = self.get(request.model, request.version)
        model.generator                       # noqa: B018 -- a tensor-only model refuses before tokenizing
        params = checked_sampling(model.with_defaults(request.params), model.vocab_size)
        if params.speculative_tokens is not None and not model.backend.capabilities.speculation:
            raise InvalidRequest(f"model '{model.config.name}' does not take 'speculative_tokens' (only the "
                                 f"own engine's multi-token decode steps do)", param="speculative_tokens")
        if params is not request.params:
            request = replace(request, params=params)
        if tokenizes_inline(request):
            return self._mark_prepared(tokenize(model, request, prompt_param))
        return self._mark_prepared(await asyncio.to_thread(tokenize, model, request, prompt_param))

    def _mark_prepared(self, request: GenerationRequest) -> GenerationRequest:
        self._prepared[id(request)] = request
        return request

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationDelta, None]:
        """Deltas of every choice of the request, interleaved; each choice ends with a finished delta.

        Invariant: below this method a request is known only by its engine key, unique in the process (the
        backend's queues, abort, admission, the cache and the trace all use it). `request.id` is the caller's
        label, which clients choose and may repeat ("id": "1" on every request); the deltas yielded here carry
        it back, so the caller sees only its own id."""
        label, began = request.id, time.monotonic()
        if self._prepared.get(id(request)) is not request:    # a face prepares first, its 400s naming its fields
            request = await self.prepare(request)
        request = replace(request, id=f"{next(self._keys):x}.{label[:64]}")
        model = self.get(request.model, request.version)
        trace = Trace(request, model.config.version, start=began)
        trace.compute_input = time.monotonic() - began           # the tokenize step
        with tracked(model, trace, self.observers):
            async with aclosing(self._answer(model, request, trace)) as deltas:
                async for delta in deltas:
                    trace.observe(delta)
                    yield replace(delta, request_id=label)

    async def _answer(self, model: LoadedModel, request: GenerationRequest,
                      trace: Trace) -> AsyncGenerator[GenerationDelta, None]:
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
            generator = model.generator
            async with aclosing(generator.generate(request)) as generated, \
                    aclosing(_text(generator, request, generated)) as deltas:
                async for delta in deltas:
                    if cache is not None:
                        recorded.append(delta)
                    yield delta
        if cache is not None:
            cache.put(model.config, request, recorded)


def _text(backend: LLMBackend, request: GenerationRequest,
          deltas: AsyncGenerator[GenerationDelta, None]) -> AsyncGenerator[GenerationDelta, None]:
    """The generate step's deltas, through the detokenize step unless the backend wrote the text itself."""
    return deltas if backend.capabilities.text_output else detokenize(backend, request, deltas)


@contextmanager
def tracked(model: LoadedModel, trace: Trace, observers: list[Observer]) -> Iterator[Trace]:
    """Counts the request in flight (unload waits for it), then closes its trace and tells the observers."""
    failure = None
    model.inflight += 1
    try:
        yield trace
    except BaseException as exc:
        failure = exc
        raise
    finally:
        model.inflight -= 1
        trace.close(failure)
        for observer in observers:
            observer.on_finish(trace)


def _version_key(version: str) -> tuple[int, str]:
    return (int(version), "") if version.isdigit() else (-1, version)


async def _retire(model: LoadedModel, timeout: float = 600.0) -> None:
    """Stop a model no longer served once its in-flight requests have finished."""
    deadline = asyncio.get_running_loop().time() + timeout
    while model.inflight > 0 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.02)
    await model.backend.stop()
