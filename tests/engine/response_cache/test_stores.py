"""The value codec and the in-memory LRU store."""
from __future__ import annotations

from conch.engine.response_cache import MemoryStore
from conch.engine.response_cache import codec
from conch.engine.types import GenerationDelta, PositionLogprobs, RequestStatus, TokenLogprob, Usage


def test_codec_round_trips_every_field():
    deltas = [
        GenerationDelta("x", 0, (5, 6), "hé",
                        (PositionLogprobs(TokenLogprob(5, "h", -0.1), (TokenLogprob(7, "a", -2.0),)),)),
        GenerationDelta("x", 1, (), "", (), RequestStatus.FINISHED_STOPPED, Usage(3, 4), stop_reason="\n"),
        GenerationDelta("x", 0, (8,), "!", (), RequestStatus.FINISHED_LENGTH, Usage(3, 2), stop_reason=2),
    ]
    back = codec.decode(codec.encode(deltas), "y")
    assert [d.request_id for d in back] == ["y"] * 3
    assert [GenerationDelta("x", **{k: getattr(d, k) for k in ("index", "token_ids", "text", "logprobs", "status",
                                                              "usage", "stop_reason")}) for d in back] == deltas


async def test_memory_store_is_bounded_in_bytes_and_evicts_least_recently_used():
    store = MemoryStore(max_bytes=1000)
    for i in range(10):
        await store.set(f"k{i}", b"x" * 98)              # 100 bytes each with the key
    assert store.size == 1000 and len(store) == 10
    assert await store.get("k0") is not None             # k0 is now the most recent
    await store.set("k10", b"y" * 197)                   # 200 bytes: two entries must go
    assert store.size <= 1000
    assert await store.get("k1") is None and await store.get("k2") is None
    assert await store.get("k0") is not None and await store.get("k10") is not None
    await store.set("huge", b"z" * 2000)                 # larger than the whole store: not kept
    assert await store.get("huge") is None and store.size <= 1000


async def test_memory_store_ttl():
    store = MemoryStore(ttl=1e-9)
    await store.set("k", b"v")
    assert await store.get("k") is None and store.size == 0
