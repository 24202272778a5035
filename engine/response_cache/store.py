"""The store interface and the in-memory LRU, bounded in bytes.

A store never raises to its caller: a failure is a miss (get) or a dropped write (set), counted in `errors`.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Protocol


class Store(Protocol):
    name: str

    @property
    def errors(self) -> int: ...             # failures so far (read-only to the cache)

    async def get(self, key: str) -> bytes | None: ...

    async def set(self, key: str, value: bytes) -> None: ...

    async def close(self) -> None: ...


class MemoryStore:
    """LRU over (key -> value, expiry). `size` counts key and value bytes; the oldest entries go first."""

    name = "memory"

    def __init__(self, max_bytes: int = 256 * 1024 * 1024, ttl: float | None = None) -> None:
        self.max_bytes, self.ttl = max_bytes, ttl
        self.size = 0
        self.errors = 0
        self.evictions = 0                   # entries dropped to stay under max_bytes
        self._items: OrderedDict[str, tuple[bytes, float | None]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    async def get(self, key: str) -> bytes | None:
        item = self._items.get(key)
        if item is None:
            return None
        value, expiry = item
        if expiry is not None and time.monotonic() > expiry:
            self._drop(key)
            return None
        self._items.move_to_end(key)
        return value

    async def set(self, key: str, value: bytes) -> None:
        cost = len(key) + len(value)
        if cost > self.max_bytes:
            return
        if key in self._items:
            self._drop(key)
        expiry = time.monotonic() + self.ttl if self.ttl else None
        self._items[key] = (value, expiry)
        self.size += cost
        while self.size > self.max_bytes:
            self._drop(next(iter(self._items)))
            self.evictions += 1

    async def delete(self, key: str) -> bool:
        """Whether the key was held (expired or not)."""
        if key not in self._items:
            return False
        self._drop(key)
        return True

    def _drop(self, key: str) -> None:
        value, _ = self._items.pop(key)
        self.size -= len(key) + len(value)

    async def close(self) -> None:
        self._items.clear()
        self.size = 0
