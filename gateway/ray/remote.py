"""The ingress side of a model deployment: a Backend whose generate runs on a Ray Serve replica.

The ingress Engine holds one RemoteBackend per model (Engine(backends=RemoteBackends(...))), so everything
above the backend (prepare and tokenize, the response cache, admission, observers, every face) runs in the
ingress unchanged; the replica's own Engine detokenizes and applies stop strings (capabilities.text_output).
"""
from __future__ import annotations

from contextvars import ContextVar
from dataclasses import replace
from typing import AsyncIterator, cast

from ray.exceptions import RayActorError
from ray.serve.exceptions import BackPressureError
from ray.serve.handle import DeploymentHandle, DeploymentResponseGenerator

from conch.engine.backend import Backend, BackendStats, Capabilities, load_backend_class
from conch.engine.errors import EngineError, ModelNotReady
from conch.engine.repository import ModelConfig
from conch.engine.types import GenerationDelta, GenerationRequest
from conch.gateway.ray.placement import in_ingress

# The replicas that served the current HTTP request, in order; gateway/ray/ingress.py puts a fresh list here
# per request and writes it into the x-conch-replica header.
served_by: ContextVar[list[str] | None] = ContextVar("conch_served_by", default=None)

_LOST = (RayActorError, BackPressureError)   # the replica died, or every replica is full


class RemoteBackend:
    """A model served by a deployment. `handle` reaches the deployment; for a multiplexed group, every call
    names the model in `multiplexed_model_id`."""

    def __init__(self, config: ModelConfig, handle: DeploymentHandle, multiplexed: bool = False) -> None:
        self.config = config
        self.handle = handle.options(multiplexed_model_id=config.name) if multiplexed else handle
        self.capabilities = Capabilities()
        self.tokenizer: object = None
        self.context_length = config.context_length

    async def start(self) -> None:
        info = await self.handle.describe.remote()
        self.tokenizer, self.context_length = info["tokenizer"], info["context_length"]
        self.capabilities = replace(info["capabilities"], text_output=True)   # the replica detokenizes

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationDelta]:
        """The replica's deltas. A replica lost before any delta arrived is retried once on another; after
        that, or mid-stream, the request fails with ModelNotReady (a 503), never silently."""
        for attempt in (1, 2):
            started = False
            # stream=True makes it a generator; Ray's typing returns the union either way
            stream = cast(DeploymentResponseGenerator, self.handle.options(stream=True).generate.remote(request))
            try:
                async for item in stream:
                    if isinstance(item, str):
                        _note(item)
                    elif isinstance(item, EngineError):
                        raise item
                    else:
                        started = True
                        yield item
                return
            except _LOST as exc:
                if started or attempt == 2:
                    raise ModelNotReady(f"model '{self.config.name}': its replica was lost "
                                        f"({type(exc).__name__}); please retry") from exc
            finally:
                stream.cancel()          # a no-op once the stream ended; otherwise the replica aborts

    async def abort(self, request_id: str, index: int | None = None) -> None:
        """Closing generate's iterator cancels the replica's stream, which aborts the request there."""

    def health(self) -> bool:
        return self.tokenizer is not None

    def stats(self) -> BackendStats:
        """Unknown at the ingress (the replica's scheduler holds them): zeros, kv_cache_usage None."""
        return BackendStats()

    async def stop(self) -> None: ...


def _note(replica: str) -> None:
    replicas = served_by.get()
    if replicas is not None:
        replicas.append(replica)


class RemoteBackends:
    """The ingress Engine's backend factory: model name -> its deployment's handle; a model that runs in the
    ingress (an ensemble, a Python model: gateway/ray/placement.py) gets its own backend here."""

    def __init__(self, handles: dict[str, DeploymentHandle], multiplexed: frozenset[str] = frozenset()) -> None:
        self.handles, self.multiplexed = handles, multiplexed

    def __call__(self, config: ModelConfig) -> Backend:
        if in_ingress(config):
            return load_backend_class(config.backend)(config)
        handle = self.handles.get(config.name)
        if handle is None:
            raise ModelNotReady(f"model '{config.name}' has no Ray deployment in this application")
        return RemoteBackend(config, handle, config.name in self.multiplexed)
