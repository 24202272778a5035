"""ResponseCache: which requests may be cached, and the lookup/store around a store.

Only deterministic requests (greedy or a fixed seed) are cached, and only complete answers are stored:
every choice finished, none aborted or failed. A hit is the stored deltas under the new request's id, so a
streamed hit streams the same chunks a miss did and a non-streamed hit collects to the same body.
"""
from __future__ import annotations

import asyncio
import logging
from collections import Counter

from conch.engine.response_cache import codec
from conch.engine.response_cache.key import cache_key
from conch.engine.response_cache.store import MemoryStore, Store
from conch.engine.repository.config import ModelConfig
from conch.engine.types import GenerationDelta, GenerationRequest, RequestStatus

log = logging.getLogger(__name__)

_UNCACHEABLE = (RequestStatus.FINISHED_ABORTED, RequestStatus.FINISHED_ERROR)


class ResponseCache:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.hits: Counter[str] = Counter()       # per model
        self.misses: Counter[str] = Counter()
        self._writes: set[asyncio.Task] = set()

    @property
    def errors(self) -> int:
        return self.store.errors

    @staticmethod
    def applies(config: ModelConfig, request: GenerationRequest) -> bool:
        return config.response_cache and request.use_cache and request.params.deterministic

    async def get(self, config: ModelConfig, request: GenerationRequest) -> list[GenerationDelta] | None:
        blob = await self.store.get(cache_key(config, request))
        deltas = None
        if blob is not None:
            try:
                deltas = codec.decode(blob, request.id)
            except Exception:                     # a value from another version: a miss
                log.warning("undecodable cache value for model %s", config.name)
        (self.hits if deltas is not None else self.misses)[config.name] += 1
        return deltas

    def put(self, config: ModelConfig, request: GenerationRequest, deltas: list[GenerationDelta]) -> None:
        """Store in the background once complete: the response never waits on the store."""
        finished = [d for d in deltas if d.finished]
        if len(finished) != request.params.n or any(d.status in _UNCACHEABLE or d.error for d in finished):
            return
        task = asyncio.ensure_future(self.store.set(cache_key(config, request), codec.encode(deltas)))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def flush(self) -> None:
        """Wait for pending writes (tests, shutdown)."""
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)

    async def close(self) -> None:
        await self.flush()
        await self.store.close()


def open_cache(spec: str | None, ttl: float | None = 3600.0) -> ResponseCache | None:
    """`memory`, `memory:BYTES`, `redis://HOST:PORT/DB` (or `rediss://`), or None/`none` for no cache."""
    if not spec or spec == "none":
        return None
    if spec == "memory" or spec.startswith("memory:"):
        size = spec.partition(":")[2]
        return ResponseCache(MemoryStore(int(size)) if size else MemoryStore())
    if spec.startswith(("redis://", "rediss://", "unix://")):
        from conch.engine.response_cache.redis_store import RedisStore

        return ResponseCache(RedisStore(spec, ttl=ttl))
    raise ValueError(f"--response-cache: expected 'memory' or 'redis://HOST:PORT/DB', got '{spec}'")
