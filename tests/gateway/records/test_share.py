"""The memory tier's per-key shares through the app (in process, over a fake backend): build_app divides the
tier among the keys, one key's writes never evict another's records, and a response larger than its key's
share is a 507 in OpenAI's error shape, not a 200 whose id then 404s."""
from __future__ import annotations

import httpx

from conch.gateway.app import build_app
from conch.gateway.auth import ApiKey, Gate, KeyRing
from conch.gateway.records import RecordStore
from tests.serving_helpers import chat_engine, fake_engine


def _client() -> httpx.AsyncClient:
    engine = chat_engine()
    gate = Gate(KeyRing([ApiKey("sk-a", "a"), ApiKey("sk-b", "b")]))
    app = build_app(engine, gate=gate, metrics=False, records=RecordStore(memory_bytes=8192))    # 4 KiB a key
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t/v1")


def _as(key: str) -> dict:
    return {"Authorization": f"Bearer sk-{key}"}


async def test_one_keys_writes_never_evict_another_keys_records():
    async with _client() as client:
        theirs = (await client.post("/conversations", headers=_as("b"),
                                    json={"items": [{"role": "user", "content": "kept"}]})).json()["id"]
        for _ in range(20):                                  # far past a's share: a's own oldest go
            made = await client.post("/conversations", headers=_as("a"),
                                     json={"items": [{"role": "user", "content": "x" * 1000}]})
            assert made.status_code == 200
        kept = await client.get(f"/conversations/{theirs}/items", headers=_as("b"))
        assert kept.status_code == 200 and kept.json()["data"][0]["content"][0]["text"] == "kept"


async def test_a_response_larger_than_the_share_is_a_507_never_acknowledged():
    async with _client() as client:
        refused = await client.post("/responses", headers=_as("a"),
                                    json={"model": "m", "input": "hi", "max_output_tokens": 3000})
        assert refused.status_code == 507, refused.text
        error = refused.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["code"] == "record_too_large"
        fits = await client.post("/responses", headers=_as("a"), json={"model": "m", "input": "hi",
                                                                      "max_output_tokens": 3000, "store": False})
        assert fits.status_code == 200                      # not stored: nothing to refuse
        big_item = {"items": [{"role": "user", "content": "y" * 5000}]}
        assert (await client.post("/conversations", headers=_as("a"), json=big_item)).status_code == 507


async def test_metrics_show_the_record_stores_own_memory():
    engine = fake_engine()
    app = build_app(engine, records=RecordStore(memory_bytes=8192))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        await client.post("/v1/conversations", json={"items": [{"role": "user", "content": "x" * 100}]})
        text = (await client.get("/metrics")).text
    assert 'conch_record_store_records{tier="memory"} 1' in text
    assert 'conch_record_store_key_share_bytes{tier="memory"} 8192' in text
    size = next(line for line in text.splitlines() if line.startswith("conch_record_store_memory_bytes"))
    assert int(float(size.split()[-1])) > 100
