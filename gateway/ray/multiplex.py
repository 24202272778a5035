"""A model group: many small models multiplexed on few replicas (`serve.multiplexed`).

The ingress names the model in the handle's `multiplexed_model_id`; Ray routes the request to a replica that
already holds it where one does, and each replica keeps at most `max_models_per_replica` models loaded,
unloading the least recently used one from its engine when another must come in.
"""
from __future__ import annotations

from typing import Any, AsyncIterator

from ray import serve

from conch.engine.engine import Engine
from conch.engine.repository import ModelRepository
from conch.engine.types import GenerationRequest
from conch.gateway.ray.model import describe, replica_id, stream


class Resident:
    """A model loaded in a replica's engine. Ray awaits `__del__` when its LRU evicts it: an instance
    attribute, so that garbage collection (which looks at the class) never calls a coroutine function."""

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine, self.name = engine, name
        self.__del__ = self._unload

    async def _unload(self) -> None:
        if self.engine.versions(self.name):
            await self.engine.unload(self.name)


@serve.deployment
class ModelGroup:
    # Ray Serve awaits an async constructor; mypy allows only a plain __init__
    async def __init__(self, repository: str | tuple[str, ...] | None, max_models_per_replica: int = 3,  # type: ignore[misc]
                       max_queue_size: int | None = None) -> None:
        self.engine = Engine(ModelRepository(repository),
                             max_queue_size=max_queue_size)

        async def load(model_id: str) -> Resident:
            await self.engine.load(model_id)
            return Resident(self.engine, model_id)

        self._resident = serve.multiplexed(max_num_models_per_replica=max_models_per_replica)(load)
        self.__del__ = self._stop       # Ray awaits it at shutdown (see Resident)

    async def _model(self) -> str:
        resident = await self._resident(serve.get_multiplexed_model_id())
        return resident.name

    async def describe(self) -> dict[str, Any]:
        return describe(self.engine, await self._model())

    def replica(self) -> str:
        return replica_id()

    def loaded(self) -> list[str]:
        """The models this replica holds now (for tests and the docs' LRU check)."""
        return [m.name for m in self.engine.models()]

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Any]:
        await self._model()
        async for item in stream(self.engine, request):
            yield item

    async def _stop(self) -> None:
        await self.engine.stop()
