"""A bounded, thread-safe LRU of compiled grammars, with one compilation per key at a time.

Two requests that bring the same new schema at once compile it once: the second waits for the
first (single flight) instead of doing the work again. Failures are not cached.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    size: int
    capacity: int


class LRUCache(Generic[V]):
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"cache capacity must be at least 1, not {capacity}")
        self._capacity = capacity
        self._items: OrderedDict[Hashable, V] = OrderedDict()  # oldest first
        self._pending: dict[Hashable, Future[V]] = {}
        self._lock = threading.Lock()
        self._hits = self._misses = 0

    def get_or_create(self, key: Hashable, create: Callable[[], V]) -> V:
        """The cached value for `key`, else `create()`'s (run once, outside the lock)."""
        with self._lock:
            if key in self._items:
                self._hits += 1
                self._items.move_to_end(key)
                return self._items[key]
            pending = self._pending.get(key)
            if pending is None:
                self._misses += 1
                pending = self._pending[key] = Future()
                owner = True
            else:
                owner = False
        return self._create(key, create, pending) if owner else pending.result()

    def _create(self, key: Hashable, create: Callable[[], V], pending: Future[V]) -> V:
        try:
            value = create()
        except BaseException as exc:
            with self._lock:
                del self._pending[key]
            pending.set_exception(exc)
            raise
        with self._lock:
            del self._pending[key]
            self._items[key] = value
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)
        pending.set_result(value)
        return value

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses, len(self._items), self._capacity)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
