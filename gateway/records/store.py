"""RecordStore: stored responses and conversations, by kind and id, each owned by the key that wrote it.

Two tiers. Memory: an LRU bounded in bytes (engine/response_cache/store.py's MemoryStore; the oldest records are
evicted, never an error). Redis (optional, `--response-store redis://...`): shared by every replica, each
record under `conch:rec:<kind>:<id>` with the configured TTL, every command through RedisLink's short
deadlines and break, so a dead Redis costs at most one deadline per outage, never a hang.

Invariants with Redis configured:
- Redis is the truth while it answers: a read asks Redis first, so a record another replica changed or
  deleted is never served stale from this replica's memory. Memory holds copies for outages.
- A write Redis refused is kept in memory and remembered as local-only (`_local_only`); it is served from
  memory, and written to Redis at the next command Redis answers.
- A read of an id not in memory while Redis is down is StoreUnavailable (503), never a guess of "not found".
- A delete Redis cannot confirm is StoreUnavailable, unless the record never reached Redis: a record deleted
  in memory alone would come back from Redis.
Ownership: a record read or deleted by another owner is RecordNotFound, exactly as an unknown id (admin may).
"""
from __future__ import annotations

import asyncio
import json
import logging
import weakref
from typing import Any

from conch.engine.response_cache.store import MemoryStore
from conch.gateway.records.errors import RecordNotFound, StoreUnavailable

log = logging.getLogger(__name__)

KINDS = ("response", "conversation")
DEFAULT_TTL_S = 30 * 24 * 3600           # as OpenAI keeps stored responses
DEFAULT_MEMORY_MB = 256
_FAILED = object()                       # RedisLink.call's default: Redis did not answer
_THREAD_BYTES = 256 * 1024               # records larger than this are decoded off the event loop


class RecordStore:
    def __init__(self, memory_bytes: int = DEFAULT_MEMORY_MB * 1024 * 1024, ttl: float = DEFAULT_TTL_S,
                 redis_url: str | None = None, timeout: float = 0.25, pause: float = 1.0,
                 prefix: str = "conch:rec:") -> None:
        self.memory = MemoryStore(memory_bytes, ttl)
        self.ttl, self.prefix = ttl, prefix
        self.link = None
        if redis_url:
            from conch.engine.response_cache.redis_store import RedisLink

            self.link = RedisLink(redis_url, timeout=timeout, pause=pause)
        self.degraded_writes = 0          # writes Redis refused, kept in memory only
        self._local_only: set[str] = set()
        self._degraded = False            # logged once per outage
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    @property
    def tier(self) -> str:
        return "redis" if self.link is not None else "memory"

    @property
    def redis_up(self) -> bool | None:
        """None without a Redis tier."""
        return None if self.link is None else self.link.up

    @property
    def redis_errors(self) -> int:
        return 0 if self.link is None else self.link.errors

    def lock(self, kind: str, record_id: str) -> asyncio.Lock:
        """One lock per record in this process, for read-modify-write updates (a conversation's items).
        Across replicas the last write wins."""
        key = _key(kind, record_id)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def put(self, kind: str, record_id: str, owner: str, value: dict) -> None:
        key = _key(kind, record_id)
        blob = json.dumps({"owner": owner, "value": value}, separators=(",", ":")).encode()
        if len(key) + len(blob) > self.memory.max_bytes:
            log.warning("record store: %s %s (%d bytes) exceeds the memory tier's bound (--response-store-mb); "
                        "it is kept only in Redis, if any", kind, record_id, len(blob))
        await self.memory.set(key, blob)
        if self.link is None:
            return
        if await self._redis(lambda r: r.set(self.prefix + key, blob, ex=self._ttl_s)) is _FAILED:
            self._keep_local(key)
        else:
            self._local_only.discard(key)

    async def get(self, kind: str, record_id: str, owner: str, *, admin: bool = False) -> dict:
        return await self._owned(kind, record_id, owner, admin)

    async def delete(self, kind: str, record_id: str, owner: str, *, admin: bool = False) -> None:
        await self._owned(kind, record_id, owner, admin)
        key = _key(kind, record_id)
        if self.link is not None and key not in self._local_only:
            if await self._redis(lambda r: r.delete(self.prefix + key)) is _FAILED:
                raise StoreUnavailable(kind, record_id, self._retry_after)
        self._local_only.discard(key)
        await self.memory.delete(key)

    async def close(self) -> None:
        if self.link is not None:
            await self.link.close()
        await self.memory.close()

    async def _owned(self, kind: str, record_id: str, owner: str, admin: bool) -> dict:
        blob = await self._load(kind, record_id)
        if blob is None:
            raise RecordNotFound(kind, record_id)
        record = await asyncio.to_thread(json.loads, blob) if len(blob) > _THREAD_BYTES else json.loads(blob)
        if record["owner"] != owner and not admin:
            raise RecordNotFound(kind, record_id)       # the same answer as an id that never existed
        return record["value"]

    async def _load(self, kind: str, record_id: str) -> bytes | None:
        key = _key(kind, record_id)
        if self.link is None:
            return await self.memory.get(key)
        blob = await self._redis(lambda r: r.get(self.prefix + key))
        if blob is _FAILED:
            held = await self.memory.get(key)
            if held is None:
                raise StoreUnavailable(kind, record_id, self._retry_after)
            return held
        if blob is None:
            if key in self._local_only:                  # written while Redis was down, not flushed yet
                return await self.memory.get(key)
            await self.memory.delete(key)                # deleted or expired elsewhere: drop the stale copy
            return None
        await self.memory.set(key, blob)
        return blob

    async def _redis(self, command) -> Any:
        """One command through the link, or _FAILED. The local-only records go to Redis first, so that a
        command never sees Redis without a record this process holds for it."""
        assert self.link is not None                     # called only with Redis configured
        if self._local_only and not await self._flush():
            return _FAILED
        result = await self.link.call(command, _FAILED)
        if result is not _FAILED and self._degraded:
            self._degraded = False
            log.info("record store: Redis at %s answers again; records are written to it", self.link.url)
        return result

    def _keep_local(self, key: str) -> None:
        assert self.link is not None                     # called only with Redis configured
        self._local_only.add(key)
        self.degraded_writes += 1
        if not self._degraded:
            self._degraded = True
            log.warning("record store: Redis at %s is not answering; stored responses and conversations are "
                        "kept in this process's memory only until it answers", self.link.url)

    async def _flush(self) -> bool:
        """Writes the local-only records to Redis; False (the rest kept) at the first command that fails."""
        assert self.link is not None                     # called only with Redis configured
        for key in list(self._local_only):
            blob = await self.memory.get(key)
            if blob is not None:                         # None: evicted meanwhile, nothing left to write
                # mypy cannot infer a lambda whose defaults bind the loop's values
                ok = await self.link.call(
                    lambda r, k=key, b=blob: r.set(self.prefix + k, b, ex=self._ttl_s),  # type: ignore[misc]
                    _FAILED)
                if ok is _FAILED:
                    return False
            self._local_only.discard(key)
        return True

    @property
    def _ttl_s(self) -> int:
        return max(1, int(self.ttl))

    @property
    def _retry_after(self) -> float:
        return max(1.0, self.link.pause if self.link is not None else 1.0)


def _key(kind: str, record_id: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown record kind {kind!r}; known: {KINDS}")
    return f"{kind}:{record_id}"


def open_records(spec: str | None = "memory", ttl: float = DEFAULT_TTL_S,
                 memory_mb: float = DEFAULT_MEMORY_MB) -> RecordStore:
    """`memory` (default) or `redis://HOST:PORT/DB` (`rediss://`, `unix://`): --response-store's values."""
    if ttl <= 0 or memory_mb <= 0:
        raise ValueError("--response-store-ttl and --response-store-mb must be > 0")
    memory_bytes = int(memory_mb * 1024 * 1024)
    if not spec or spec == "memory":
        return RecordStore(memory_bytes, ttl)
    if spec.startswith(("redis://", "rediss://", "unix://")):
        return RecordStore(memory_bytes, ttl, redis_url=spec)
    raise ValueError(f"--response-store: expected 'memory' or 'redis://HOST:PORT/DB', got '{spec}'")
