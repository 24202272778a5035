"""grammars/cache.py: bounded LRU, one creation per key at a time, failures not kept."""

from __future__ import annotations

import threading
import time

import pytest

from conch.grammars.cache import LRUCache


def test_hits_return_the_same_object_and_count():
    cache: LRUCache[object] = LRUCache(4)
    first = cache.get_or_create("k", object)
    assert cache.get_or_create("k", object) is first
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.size, stats.capacity) == (1, 1, 1, 4)


def test_least_recently_used_is_evicted():
    cache: LRUCache[str] = LRUCache(2)
    cache.get_or_create("a", lambda: "A")
    cache.get_or_create("b", lambda: "B")
    cache.get_or_create("a", lambda: "A2")  # a is now the most recent
    cache.get_or_create("c", lambda: "C")  # evicts b
    assert cache.get_or_create("a", lambda: "new") == "A"
    assert cache.get_or_create("b", lambda: "new") == "new"
    assert cache.stats().size == 2


def test_concurrent_misses_create_once():
    cache: LRUCache[object] = LRUCache(8)
    calls = []

    def slow() -> object:
        calls.append(1)
        time.sleep(0.05)
        return object()

    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get_or_create("k", slow))) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len({id(r) for r in results}) == 1


def test_failures_are_raised_and_not_cached():
    cache: LRUCache[str] = LRUCache(2)

    def boom() -> str:
        raise ValueError("no")

    with pytest.raises(ValueError):
        cache.get_or_create("k", boom)
    assert cache.get_or_create("k", lambda: "ok") == "ok"


def test_capacity_must_be_positive():
    with pytest.raises(ValueError):
        LRUCache(0)
