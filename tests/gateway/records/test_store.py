"""RecordStore: the memory tier (LRU by bytes, TTL), ownership, admin delete, and the Redis tier with a real
redis-server: shared between two stores (two replicas), degraded to memory while it is down (a log line, the
metrics, 503 for ids only Redis held), and written again once it is back."""
from __future__ import annotations

import asyncio
import logging

import pytest
import redis

from conch.gateway.auth import Forbidden
from conch.gateway.records import Caller, RecordNotFound, RecordStore, RecordTooLarge, StoreUnavailable, open_records
from conch.gateway.records.conversations import add_conversation_items, conversation_items, create_conversation
from tests.serving_helpers import start_redis


def _value(n: int, size: int = 100) -> dict:
    return {"n": n, "pad": "x" * size}


async def test_put_get_delete_round_trip():
    store = RecordStore()
    await store.put("response", "resp_1", "alice", {"a": [1, 2], "b": None})
    assert await store.get("response", "resp_1", "alice") == {"a": [1, 2], "b": None}
    await store.delete("response", "resp_1", "alice")
    with pytest.raises(RecordNotFound):
        await store.get("response", "resp_1", "alice")
    with pytest.raises(RecordNotFound):
        await store.delete("response", "resp_1", "alice")


async def test_kinds_are_separate_namespaces():
    store = RecordStore()
    await store.put("response", "same", "", {"kind": "response"})
    await store.put("conversation", "same", "", {"kind": "conversation"})
    assert (await store.get("response", "same", ""))["kind"] == "response"
    assert (await store.get("conversation", "same", ""))["kind"] == "conversation"
    with pytest.raises(ValueError):
        await store.put("secret", "x", "", {})


async def test_memory_tier_is_an_lru_bounded_in_bytes():
    store = RecordStore(memory_bytes=2000)
    for n in range(5):
        await store.put("response", f"r{n}", "", _value(n, 300))
    await store.get("response", "r1", "")                       # r1 is now the most recently used
    for n in range(5, 7):
        await store.put("response", f"r{n}", "", _value(n, 300))
    assert store.memory.size <= 2000 and store.memory.evictions >= 2
    with pytest.raises(RecordNotFound):
        await store.get("response", "r0", "")                  # the oldest went first, without an error
    assert (await store.get("response", "r1", ""))["n"] == 1
    assert (await store.get("response", "r6", ""))["n"] == 6


async def test_memory_tier_expires_after_the_ttl():
    store = RecordStore(ttl=0.05)
    await store.put("response", "r", "", _value(1))
    await asyncio.sleep(0.1)
    with pytest.raises(RecordNotFound):
        await store.get("response", "r", "")


async def test_another_owner_gets_the_same_not_found_as_an_unknown_id():
    store = RecordStore()
    await store.put("conversation", "c1", "alice", _value(1))
    with pytest.raises(RecordNotFound) as other:
        await store.get("conversation", "c1", "bob")
    with pytest.raises(RecordNotFound) as unknown:
        await store.get("conversation", "c2", "bob")
    assert str(other.value).replace("c1", "X") == str(unknown.value).replace("c2", "X")
    with pytest.raises(RecordNotFound):
        await store.delete("conversation", "c1", "bob")
    assert (await store.get("conversation", "c1", "alice"))["n"] == 1     # bob's delete changed nothing


async def test_an_admin_touches_only_records_of_its_models():
    store = RecordStore()
    await store.put("response", "r1", "alice", _value(1), model="tiny")
    await store.put("response", "r2", "alice", _value(2), model="tiny2")
    await store.put("conversation", "c", "alice", _value(3))                  # a conversation has no model
    scoped = Caller("scoped", admin=True, models=frozenset({"tiny"}))
    assert (await store.get("response", "r1", scoped))["n"] == 1
    for kind, record_id in (("response", "r2"), ("conversation", "c")):
        with pytest.raises(RecordNotFound):
            await store.get(kind, record_id, scoped)
        with pytest.raises(RecordNotFound):
            await store.delete(kind, record_id, scoped)
        with pytest.raises(RecordNotFound):
            await store.update(kind, record_id, scoped, lambda v: v.update(n=0))
    root = Caller("root", admin=True)                                          # every model
    assert (await store.get("conversation", "c", root))["n"] == 3
    await store.update("response", "r2", root, lambda v: v.update(n=20))      # the owner stays alice
    assert (await store.get("response", "r2", "alice"))["n"] == 20
    await store.delete("response", "r2", root)
    with pytest.raises(RecordNotFound):
        await store.get("response", "r2", "alice")


async def test_each_key_evicts_only_its_own_records():
    store = RecordStore(memory_bytes=4000)
    store.share_among(2)                                                       # 2000 bytes a key
    await store.put("response", "bob0", "bob", _value(0, 300))
    for n in range(20):                                                         # alice writes far past her share
        await store.put("response", f"alice{n}", "alice", _value(n, 300))
    assert (await store.get("response", "bob0", "bob"))["n"] == 0             # bob's record is still there
    assert (await store.get("response", "alice19", "alice"))["n"] == 19
    with pytest.raises(RecordNotFound):
        await store.get("response", "alice0", "alice")                         # alice's oldest went
    assert store.memory.size <= 4000


async def test_a_record_larger_than_the_share_is_refused_never_dropped():
    store = RecordStore(memory_bytes=2000)
    with pytest.raises(RecordTooLarge):
        await store.put("response", "big", "alice", _value(0, 3000))
    record = await create_conversation(store, "alice", [{"role": "user", "content": "x"}], None)
    with pytest.raises(RecordTooLarge):                                        # the append that would overflow
        await add_conversation_items(store, record["id"], "alice", [{"role": "user", "content": "y" * 3000}])
    assert len(await conversation_items(store, record["id"], "alice")) == 1   # nothing acknowledged, nothing lost


async def test_a_key_of_no_model_creates_no_conversation():
    with pytest.raises(Forbidden):
        await create_conversation(RecordStore(), Caller("none", models=frozenset()), [], None)


def test_open_records_specs():
    assert open_records("memory").tier == "memory"
    assert open_records("redis://127.0.0.1:1/0", ttl=60, memory_mb=1).tier == "redis"
    assert open_records("memory", memory_mb=1).memory.max_bytes == 1024 * 1024
    for bad in ({"spec": "postgres://x"}, {"ttl": 0}, {"memory_mb": -1}):
        with pytest.raises(ValueError):
            open_records(**{"spec": "memory", **bad})


def test_conch_serve_refuses_a_bad_store_at_start():
    from conch.gateway.cli import main

    for flags in (["--response-store", "postgres://db"], ["--response-store-mb", "0"], ["--response-store-ttl", "-1"]):
        with pytest.raises(SystemExit, match="response-store"):
            main(["serve", *flags])


async def test_conversation_helpers_keep_items_in_order_with_ids():
    store = RecordStore()
    record = await create_conversation(store, "alice", [{"role": "user", "content": "hi"}], {"topic": "t"})
    added = await add_conversation_items(store, record["id"], "alice", [
        {"role": "assistant", "content": "hello"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}], "id": "msg_mine"}])
    items = await conversation_items(store, record["id"], "alice")
    assert items[1:] == added and len(items) == 4
    assert items[0]["content"] == [{"type": "input_text", "text": "hi"}] and items[0]["status"] == "completed"
    assert items[1]["content"] == [{"type": "output_text", "text": "hello", "annotations": []}]
    assert items[2]["id"].startswith("fc_") and items[3]["id"] == "msg_mine"
    assert len({i["id"] for i in items}) == 4
    with pytest.raises(RecordNotFound):
        await conversation_items(store, record["id"], "bob")


# --- the Redis tier, with a real redis-server --------------------------------------------------------------


@pytest.fixture
def redis_srv(tmp_path):
    server = start_redis(tmp_path)
    yield server
    server.stop()


async def test_redis_tier_is_shared_and_namespaced_with_the_ttl(redis_srv):
    a = RecordStore(ttl=1000, redis_url=redis_srv.url)
    b = RecordStore(ttl=1000, redis_url=redis_srv.url)
    await a.put("conversation", "c1", "alice", _value(1))
    assert (await b.get("conversation", "c1", "alice"))["n"] == 1     # another replica reads it
    raw = redis.Redis(port=redis_srv.port)
    assert raw.exists("conch:rec:conversation:c1") and 990 <= raw.ttl("conch:rec:conversation:c1") <= 1000
    await b.put("conversation", "c1", "alice", _value(2))                # changed on b...
    assert (await a.get("conversation", "c1", "alice"))["n"] == 2     # ...a never serves its stale copy
    await b.delete("conversation", "c1", "alice")
    with pytest.raises(RecordNotFound):
        await a.get("conversation", "c1", "alice")
    await a.close()
    await b.close()


async def test_redis_tier_expires_after_the_ttl(redis_srv):
    a = RecordStore(ttl=1, redis_url=redis_srv.url)
    b = RecordStore(ttl=1, redis_url=redis_srv.url)
    await a.put("response", "r", "", _value(1))
    await asyncio.sleep(1.5)
    with pytest.raises(RecordNotFound):
        await b.get("response", "r", "")
    await a.close()
    await b.close()


async def test_redis_down_degrades_to_memory_then_writes_to_redis_again(redis_srv, caplog):
    store = RecordStore(redis_url=redis_srv.url, pause=0.05)
    other = RecordStore(redis_url=redis_srv.url, pause=0.05)     # another replica: nothing in its memory
    await store.put("response", "before", "alice", _value(1))
    redis_srv.stop()
    with caplog.at_level(logging.WARNING, logger="conch.gateway.records.store"):
        await store.put("response", "during", "alice", _value(2))           # never raises
        await asyncio.sleep(0.06)
        await store.put("response", "during2", "alice", _value(3))
    assert len([r for r in caplog.records if r.levelno == logging.WARNING and "record store" in r.message]) == 1
    assert store.redis_up is False and store.degraded_writes == 2 and store.redis_errors >= 1
    assert (await store.get("response", "during", "alice"))["n"] == 2      # served from memory
    with pytest.raises(StoreUnavailable):
        await store.get("response", "before", "alice")                      # Redis holds it: no stale copy
    with pytest.raises(StoreUnavailable) as unavailable:
        await other.get("response", "before", "alice")                     # only Redis holds it: 503
    assert unavailable.value.retry_after >= 1
    with pytest.raises(StoreUnavailable):
        await store.delete("response", "before", "alice")                   # Redis still holds it
    redis_srv.restart()                                                      # a fresh, empty Redis
    await asyncio.sleep(0.06)                                                # past the link's break
    assert (await store.get("response", "during", "alice"))["n"] == 2
    assert store.redis_up is True
    assert (await other.get("response", "during", "alice"))["n"] == 2      # flushed to Redis once back
    await store.put("response", "after", "alice", _value(4))
    assert (await other.get("response", "after", "alice"))["n"] == 4
    await store.close()
    await other.close()


async def test_a_record_written_while_down_can_be_deleted_while_down(redis_srv):
    store = RecordStore(redis_url=redis_srv.url, pause=0.05)
    redis_srv.stop()
    await store.put("response", "local", "", _value(1))
    await store.delete("response", "local", "")                 # it never reached Redis: deleting it is complete
    redis_srv.restart()
    await asyncio.sleep(0.06)
    with pytest.raises(RecordNotFound):
        await store.get("response", "local", "")
    await store.close()


async def test_a_dead_redis_never_hangs_a_read(redis_srv):
    store = RecordStore(redis_url=redis_srv.url, timeout=0.1, pause=5.0)
    redis_srv.stop()
    for _ in range(20):                                         # one deadline, then the link's break
        with pytest.raises(StoreUnavailable):
            await asyncio.wait_for(store.get("response", "nope", ""), 2.0)
    assert store.redis_errors == 1
    await store.close()


async def test_two_replicas_appending_at_once_lose_no_item(redis_srv):
    a = RecordStore(redis_url=redis_srv.url, timeout=2.0)
    b = RecordStore(redis_url=redis_srv.url, timeout=2.0)
    record = await create_conversation(a, "alice", [], None)
    await asyncio.gather(*(add_conversation_items(store, record["id"], "alice", [{"role": "user", "content": str(n)}])
                           for n in range(30) for store in [(a, b)[n % 2]]))
    texts = sorted(int(i["content"][0]["text"]) for i in await conversation_items(b, record["id"], "alice"))
    assert texts == list(range(30))
    await a.close()
    await b.close()


async def test_an_acknowledged_item_survives_a_stalled_redis(redis_srv):
    a = RecordStore(redis_url=redis_srv.url, timeout=0.2, pause=0.05)
    b = RecordStore(redis_url=redis_srv.url, timeout=0.2, pause=0.05)
    record = await create_conversation(a, "alice", [], None)
    acknowledged: list[str] = []

    async def append(store: RecordStore, text: str) -> None:
        try:
            await add_conversation_items(store, record["id"], "alice", [{"role": "user", "content": text}])
            acknowledged.append(text)
        except StoreUnavailable:                                      # a 503: the client knows to retry
            pass

    await append(a, "first")
    await b.get("conversation", record["id"], "alice")                # b has read it before the stall
    with redis_srv.stalled():
        await asyncio.gather(append(a, "during-a"), append(b, "during-b"))
    await asyncio.sleep(0.06)                                          # past the links' break
    await asyncio.gather(append(b, "after-b"), append(a, "after-a"))
    stored = {i["content"][0]["text"] for i in await conversation_items(a, record["id"], "alice")}
    assert {"first", "after-a", "after-b"} <= set(acknowledged) and set(acknowledged) <= stored
    await a.close()
    await b.close()


async def test_a_delete_is_seen_by_the_other_replica_while_redis_stalls(redis_srv):
    a = RecordStore(redis_url=redis_srv.url, timeout=0.2, pause=0.05)
    b = RecordStore(redis_url=redis_srv.url, timeout=0.2, pause=0.05)
    await a.put("response", "r", "alice", _value(1))
    assert (await b.get("response", "r", "alice"))["n"] == 1
    await a.delete("response", "r", "alice")
    with redis_srv.stalled(), pytest.raises(StoreUnavailable):          # never the deleted record's copy
        await b.get("response", "r", "alice")
    await asyncio.sleep(0.06)
    with pytest.raises(RecordNotFound):
        await b.get("response", "r", "alice")
    await a.close()
    await b.close()
