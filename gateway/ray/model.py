"""The model deployment: each replica holds an Engine serving one model, and streams its deltas to the
ingress through a generator handle.

Wire of `generate` (one Ray stream per request): the replica's id (a str) first, then GenerationDelta
items, or an EngineError object that the ingress raises again (EngineError pickles with its fields). A
cancelled stream (the client went away) cancels this generator, which aborts the request in the engine.
"""
from __future__ import annotations

from contextlib import aclosing
from typing import Any, AsyncIterator

from ray import serve

from conch.engine.engine import Engine
from conch.engine.errors import EngineError
from conch.engine.repository import ModelRepository
from conch.engine.types import GenerationRequest


def replica_id() -> str:
    """This replica's id as Ray Serve names it (unique within the deployment)."""
    return serve.get_replica_context().replica_id.unique_id


def describe(engine: Engine, name: str) -> dict[str, Any]:
    """What the ingress needs to serve a model it does not hold: tokenizer, capabilities, context length."""
    backend = engine.get(name).backend
    return {"tokenizer": backend.tokenizer, "capabilities": backend.capabilities,
            "context_length": backend.context_length}


async def stream(engine: Engine, request: GenerationRequest) -> AsyncIterator[Any]:
    yield replica_id()
    try:
        async with aclosing(engine.generate(request)) as deltas:
            async for delta in deltas:
                yield delta
    except EngineError as exc:     # raised again at the ingress, as the engine there would have
        yield exc


@serve.deployment
class ModelServer:
    """One model. The response cache and limits live at the ingress, so this engine has none."""

    # Ray Serve awaits an async constructor; mypy allows only a plain __init__
    async def __init__(  # type: ignore[misc]
            self, repository: str | tuple[str, ...] | None, name: str, max_queue_size: int | None = None) -> None:
        self.name = name
        self.engine = Engine(ModelRepository(repository),
                             max_queue_size=max_queue_size)
        await self.engine.load(name)
        self.__del__ = self._stop       # Ray awaits it at shutdown; garbage collection never sees a coroutine

    def describe(self) -> dict[str, Any]:
        return describe(self.engine, self.name)

    def replica(self) -> str:
        return replica_id()

    def inflight(self) -> int:
        """Requests running in this replica's engine now (a cancelled client's request leaves it)."""
        return sum(m.inflight for m in self.engine.all_versions())

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Any]:
        async for item in stream(self.engine, request):
            yield item

    async def _stop(self) -> None:
        await self.engine.stop()

