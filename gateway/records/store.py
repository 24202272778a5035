"""RecordStore: stored responses and conversations, by kind and id, each owned by the key that wrote it and
tagged with the model it was made with (None for a conversation).

Two tiers. Memory (gateway/records/memory.py): one LRU per owner, each bounded by the owner's share of
`--response-store-mb`, so one key evicts only its own records; a record over the share is RecordTooLarge (507),
never acknowledged. Redis (optional, `--response-store redis://...`): shared by every replica, each record under
`conch:rec:<kind>:<id>` with the configured TTL, every command through RedisLink's short deadlines and break,
so a dead Redis costs at most one deadline per outage, never a hang.

Invariants with Redis configured:
- Redis is the truth: a read asks Redis, and memory holds only the records Redis has not taken yet (written
  while it was down: `_local_only`), never copies of what Redis holds. So a record deleted or changed on one
  replica is never served stale by another, even while Redis stalls: a read of an id Redis holds while Redis
  does not answer is StoreUnavailable (503), never a guess from a copy.
- A local-only record is served from memory and written to Redis at the next command Redis answers.
- An update (`update`: a conversation's items, its metadata, a cancel) reads the record from Redis and writes
  it back with a compare-and-set Lua script (the write happens only if the record is still the one read, else
  it is read again): never a read-modify-write from a local copy, so two replicas appending at once both land.
  An update Redis cannot confirm is StoreUnavailable; only a local-only record is updated in memory.
- A delete Redis cannot confirm is StoreUnavailable, unless the record never reached Redis.
Ownership (gateway/records/owner.py's Caller): a record another key may not touch is RecordNotFound, exactly as
an unknown id; an update keeps the record's owner and model whoever makes it (an admin's cancel included).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import weakref
from dataclasses import dataclass
from typing import Any, Callable

from conch.gateway.records.errors import RecordNotFound, StoreUnavailable
from conch.gateway.records.memory import SharedMemory
from conch.gateway.records.owner import Caller, as_caller

log = logging.getLogger(__name__)

KINDS = ("response", "conversation")
DEFAULT_TTL_S = 30 * 24 * 3600           # as OpenAI keeps stored responses
DEFAULT_MEMORY_MB = 64       # the memory tier: the default models, fuzzed and loaded to it, stay <= 1.3 GB RSS
_FAILED = object()                       # RedisLink.call's default: Redis did not answer
_THREAD_BYTES = 256 * 1024               # records larger than this are decoded off the event loop
_CAS_TRIES = 16                          # compare-and-set rounds before an update gives up (503)
# KEYS[1] the record; ARGV: the sha1 of the blob read, the new blob, the TTL. 1 written, 0 changed meanwhile
# (read again), -1 deleted meanwhile.
_CAS = """
local current = redis.call('GET', KEYS[1])
if not current then return -1 end
if redis.sha1hex(current) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return 1
"""

Change = Callable[[dict], None]          # mutates a record's value in place (may raise to refuse the update)


@dataclass
class _Held:
    """One record as read: its envelope ({owner, model, value}), the blob it came from, and where."""

    envelope: dict[str, Any]
    blob: bytes
    in_memory: bool                      # True: memory is its only tier (no Redis, or local-only)


class RecordStore:
    def __init__(self, memory_bytes: int = DEFAULT_MEMORY_MB * 1024 * 1024, ttl: float = DEFAULT_TTL_S,
                 redis_url: str | None = None, timeout: float = 0.25, pause: float = 1.0,
                 prefix: str = "conch:rec:") -> None:
        self.memory = SharedMemory(memory_bytes, ttl)
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

    def share_among(self, owners: int) -> None:
        """Divides the memory tier among `owners` keys (each key's records evict only its own)."""
        self.memory.share_among(owners)

    def lock(self, kind: str, record_id: str) -> asyncio.Lock:
        """One lock per record in this process: its updates queue here before their compare-and-set."""
        key = _key(kind, record_id)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def put(self, kind: str, record_id: str, owner: str, value: dict, model: str | None = None) -> None:
        """Writes the whole record (a new one, or a response's next state: the last write wins)."""
        key = _key(kind, record_id)
        blob = _encode(owner, model, value)
        if self.link is None:
            await self.memory.set(owner, key, blob)
            return
        if await self._redis(lambda r: r.set(self.prefix + key, blob, ex=self._ttl_s)) is _FAILED:
            await self.memory.set(owner, key, blob)      # RecordTooLarge here: refused, not acknowledged
            self._keep_local(key)
        else:
            self._local_only.discard(key)
            await self.memory.delete(key)

    async def get(self, kind: str, record_id: str, who: Caller | str) -> dict:
        return (await self._owned(kind, record_id, as_caller(who))).envelope["value"]

    async def update(self, kind: str, record_id: str, who: Caller | str, change: Change) -> dict:
        """Applies `change` to the record as Redis holds it now, atomically (see the module's invariants);
        the owner and model stay. Returns the new value."""
        async with self.lock(kind, record_id):
            for _ in range(_CAS_TRIES):
                held = await self._owned(kind, record_id, as_caller(who))
                value = held.envelope["value"]
                change(value)
                if await self._write_back(kind, record_id, held, value):
                    return value
        log.warning("record store: %s %s changed under %d updates in a row", kind, record_id, _CAS_TRIES)
        raise StoreUnavailable(kind, record_id, self._retry_after)

    async def _write_back(self, kind: str, record_id: str, held: _Held, value: dict) -> bool:
        """True once `value` replaced the record `held` was read from; False when Redis holds another version
        of it now (read it again)."""
        key = _key(kind, record_id)
        owner = held.envelope["owner"]
        blob = _encode(owner, held.envelope.get("model"), value)
        if held.in_memory:
            await self.memory.set(owner, key, blob)
            return True
        expected = hashlib.sha1(held.blob).hexdigest()
        done = await self._redis(lambda r: r.eval(_CAS, 1, self.prefix + key, expected, blob, self._ttl_s))
        if done is _FAILED:
            raise StoreUnavailable(kind, record_id, self._retry_after)
        if done == -1:
            raise RecordNotFound(kind, record_id)
        return done == 1

    async def delete(self, kind: str, record_id: str, who: Caller | str) -> None:
        await self._owned(kind, record_id, as_caller(who))
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

    async def _owned(self, kind: str, record_id: str, who: Caller) -> _Held:
        held = await self._load(kind, record_id)
        if held is None:
            raise RecordNotFound(kind, record_id)
        if not who.may_touch(held.envelope["owner"], held.envelope.get("model")):
            raise RecordNotFound(kind, record_id)       # the same answer as an id that never existed
        return held

    async def _load(self, kind: str, record_id: str) -> _Held | None:
        key = _key(kind, record_id)
        if self.link is None:
            return await self._decode(await self.memory.get(key), True)
        blob = await self._redis(lambda r: r.get(self.prefix + key))
        if blob is _FAILED or blob is None:
            if key in self._local_only:                  # written while Redis was down, not flushed yet
                return await self._decode(await self.memory.get(key), True)
            if blob is _FAILED:                          # Redis may hold it: no guess from this process
                raise StoreUnavailable(kind, record_id, self._retry_after)
            return None
        return await self._decode(blob, False)

    @staticmethod
    async def _decode(blob: bytes | None, in_memory: bool) -> _Held | None:
        if blob is None:
            return None
        envelope = await asyncio.to_thread(json.loads, blob) if len(blob) > _THREAD_BYTES else json.loads(blob)
        return _Held(envelope, blob, in_memory)

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
        """Writes the local-only records to Redis (and drops them from memory); False (the rest kept) at the
        first command that fails."""
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
                await self.memory.delete(key)
            self._local_only.discard(key)
        return True

    @property
    def _ttl_s(self) -> int:
        return max(1, int(self.ttl))

    @property
    def _retry_after(self) -> float:
        return max(1.0, self.link.pause if self.link is not None else 1.0)


def _encode(owner: str, model: str | None, value: dict) -> bytes:
    """The envelope; allow_nan=False: a NaN that reached a record would make every later read fail."""
    return json.dumps({"owner": owner, "model": model, "value": value}, separators=(",", ":"),
                      allow_nan=False).encode()


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
