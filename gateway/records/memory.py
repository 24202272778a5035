"""The record store's memory tier: one LRU per owner (engine/response_cache/store.py's MemoryStore), each
bounded by the owner's share of the tier's bytes, so that one key's writes evict only its own oldest records.

`share` is the bound divided among the keys the gateway serves (RecordStore.share_among); the shares add up to
the bound. A record larger than its owner's share is RecordTooLarge, never dropped in silence: what the tier
acknowledges, it holds (until the owner's own later writes evict it, or its TTL ends).
"""
from __future__ import annotations

from conch.engine.response_cache.store import MemoryStore
from conch.gateway.records.errors import RecordTooLarge


class SharedMemory:
    def __init__(self, max_bytes: int, ttl: float | None) -> None:
        self.max_bytes, self.ttl = max_bytes, ttl
        self.share = max_bytes                          # bytes each owner may hold
        self._parts: dict[str, MemoryStore] = {}        # owner -> that owner's LRU
        self._home: dict[str, str] = {}                 # record key -> its owner's partition

    def share_among(self, owners: int) -> None:
        """Each owner's share: the bound over `owners` (the served keys); applies to each owner's next write."""
        self.share = self.max_bytes // max(1, owners)
        for part in self._parts.values():
            part.max_bytes = self.share

    @property
    def size(self) -> int:
        return sum(part.size for part in self._parts.values())

    @property
    def evictions(self) -> int:
        return sum(part.evictions for part in self._parts.values())

    def __len__(self) -> int:
        return sum(len(part) for part in self._parts.values())

    async def set(self, owner: str, key: str, blob: bytes) -> None:
        """Holds the record, evicting the owner's own oldest to make room; RecordTooLarge over the share."""
        if len(key) + len(blob) > self.share:
            raise RecordTooLarge(key, len(blob), self.share)
        home = self._home.get(key)
        if home is not None and home != owner:          # the same key under another owner: one copy only
            await self._parts[home].delete(key)
        part = self._parts.get(owner)
        if part is None:
            part = self._parts[owner] = MemoryStore(self.share, self.ttl)
        await part.set(key, blob)
        self._home[key] = owner
        if len(self._home) > 2 * len(self) + 64:        # forget the homes of evicted records now and then
            self._home = {k: o for k, o in self._home.items() if k in self._parts[o]}

    async def get(self, key: str) -> bytes | None:
        home = self._home.get(key)
        return None if home is None else await self._parts[home].get(key)

    async def delete(self, key: str) -> bool:
        home = self._home.pop(key, None)
        return home is not None and await self._parts[home].delete(key)

    async def close(self) -> None:
        for part in self._parts.values():
            await part.close()
        self._parts.clear()
        self._home.clear()
