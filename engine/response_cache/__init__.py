"""The response cache: deterministic requests answered from a store (memory LRU or Redis) by replaying deltas."""
from conch.engine.response_cache.cache import ResponseCache, open_cache
from conch.engine.response_cache.store import MemoryStore, Store

__all__ = ["MemoryStore", "ResponseCache", "Store", "open_cache"]
