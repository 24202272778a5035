"""/v1/conversations through two real `conch serve` processes sharing one real Redis (`--response-store`),
with three keys (alice, bob, an admin): the openai SDK's `client.conversations`, the Agents SDK's
OpenAIConversationsSession, ownership (another key's id is the 404 of an unknown id), 400s that name the
field, a conversation continued on the other process, and Redis going away (503 with Retry-After for what
only Redis held)."""
from __future__ import annotations

import re
import time

import httpx
import openai
import pytest

from tests.agents_sdk import run_agents_sdk
from tests.conftest import start_server, write_repository

KEYS = {"alice": "sk-alice", "bob": "sk-bob", "root": "sk-root", "scoped": "sk-scoped", "none": "sk-none"}


@pytest.fixture(scope="module")
def servers(tmp_path_factory, redis_server):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 4}})
    (root / "keys.yaml").write_text("keys:\n  - {key: sk-alice, name: alice}\n  - {key: sk-bob, name: bob}\n"
                                    "  - {key: sk-root, name: root, admin: true}\n"
                                    "  - {key: sk-scoped, name: scoped, admin: true, models: [tiny2]}\n"
                                    "  - {key: sk-none, name: none, models: []}\n")
    args = ["--model-repository", str(root), "--api-keys-file", str(root / "keys.yaml"),
            "--response-store", redis_server.url, "--response-store-mb", "8"]
    pair = [start_server(args, root) for _ in range(2)]
    yield pair
    for s in pair:
        s.stop()


def _client(server, who: str = "alice") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.v1, api_key=KEYS[who], max_retries=0)


def test_a_conversation_through_the_openai_sdk(servers):
    client = _client(servers[0])
    conv = client.conversations.create(items=[{"role": "user", "content": "Hi"}], metadata={"topic": "greeting"})
    assert conv.id.startswith("conv_") and conv.object == "conversation" and conv.metadata == {"topic": "greeting"}
    assert client.conversations.retrieve(conv.id).created_at == conv.created_at
    assert client.conversations.update(conv.id, metadata={"topic": "other"}).metadata == {"topic": "other"}
    added = client.conversations.items.create(conv.id, items=[
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello"}]},
        {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": '{"a": 1}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "2"}])
    assert [i.type for i in added.data] == ["message", "function_call", "function_call_output"]
    assert added.first_id == added.data[0].id and added.last_id == added.data[-1].id

    newest_first = client.conversations.items.list(conv.id)
    assert [i.type for i in newest_first.data] == ["function_call_output", "function_call", "message", "message"]
    paged = list(client.conversations.items.list(conv.id, order="asc", limit=3))   # the SDK follows `after`
    assert [i.id for i in paged] == [i.id for i in newest_first.data][::-1]
    first = paged[0]
    assert first.role == "user" and first.content[0].type == "input_text" and first.content[0].text == "Hi"
    assert first.status == "completed"
    assert client.conversations.items.retrieve(paged[2].id, conversation_id=conv.id).call_id == "call_1"

    assert client.conversations.items.delete(paged[1].id, conversation_id=conv.id).id == conv.id
    assert [i.id for i in client.conversations.items.list(conv.id, order="asc")] == [paged[0].id, *[
        i.id for i in paged[2:]]]
    deleted = client.conversations.delete(conv.id)
    assert deleted.deleted and deleted.object == "conversation.deleted"
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(conv.id)


def test_another_keys_conversation_is_the_404_of_an_unknown_id(servers):
    conv = _client(servers[0], "alice").conversations.create(items=[{"role": "user", "content": "mine"}])
    headers = {"Authorization": f"Bearer {KEYS['bob']}"}
    unknown = "conv_0123456789abcdef0123456789abcdef"
    for method, path in (("GET", ""), ("GET", "/items"), ("POST", "/items"), ("DELETE", "")):
        body = {"items": [{"role": "user", "content": "theirs"}]} if method == "POST" else None
        theirs = httpx.request(method, f"{servers[0].v1}/conversations/{conv.id}{path}", json=body, headers=headers)
        missing = httpx.request(method, f"{servers[0].v1}/conversations/{unknown}{path}", json=body, headers=headers)
        assert theirs.status_code == missing.status_code == 404
        assert theirs.json()["error"]["code"] == "not_found"
        assert theirs.json() == {"error": {**missing.json()["error"], "message": missing.json()["error"]["message"]
                                           .replace(unknown, conv.id)}}
    alice = _client(servers[1], "alice")
    assert [i.content[0].text for i in alice.conversations.items.list(conv.id)] == ["mine"]   # bob changed nothing
    assert _client(servers[1], "root").conversations.delete(conv.id).deleted                # an admin may delete
    with pytest.raises(openai.NotFoundError):
        alice.conversations.retrieve(conv.id)


def test_bad_requests_are_400s_naming_the_field(servers):
    client = _client(servers[0])
    conv = client.conversations.create()
    cases = [
        ({"items": [{"type": "web_search_call", "id": "ws_1"}]}, "items.0.type"),
        ({"items": [{"role": "user", "content": "x", "colour": "red"}]}, "items.0.colour"),
        ({"items": [{"role": "robot", "content": "x"}]}, "items.0.role"),
        ({"items": [{"role": "user", "content": "x"}] * 21}, "items"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
        ({"colour": "red"}, "colour")]
    for body, param in cases:
        with pytest.raises(openai.BadRequestError) as refused:
            client.post("/conversations", body=body, cast_to=object)
        assert refused.value.body["param"] == param, body
    with pytest.raises(openai.PermissionDeniedError):                      # a key of no model stores nothing
        _client(servers[0], "none").conversations.create()
    with pytest.raises(openai.BadRequestError) as refused:
        client.conversations.items.create(conv.id, items=[])
    assert refused.value.body["param"] == "items"
    for query, param in (({"limit": 0}, "limit"), ({"order": "up"}, "order"), ({"after": "msg_nope"}, "after")):
        with pytest.raises(openai.BadRequestError) as refused:
            client.conversations.items.list(conv.id, **query)
        assert refused.value.body["param"] == param
    with pytest.raises(openai.NotFoundError) as missing:
        client.conversations.items.retrieve("msg_nope", conversation_id=conv.id)
    assert missing.value.body["param"] == "item_id"


def test_a_conversation_continues_on_the_other_process(servers):
    one, two = _client(servers[0]), _client(servers[1])
    conv = one.conversations.create(items=[{"role": "user", "content": "first"}])
    assert two.conversations.retrieve(conv.id).id == conv.id
    two.conversations.items.create(conv.id, items=[{"role": "assistant", "content": "second"}])
    one.conversations.items.create(conv.id, items=[{"role": "user", "content": "third"}])
    texts = [i.content[0].text for i in two.conversations.items.list(conv.id, order="asc")]
    assert texts == ["first", "second", "third"]
    two.conversations.delete(conv.id)
    with pytest.raises(openai.NotFoundError):
        one.conversations.retrieve(conv.id)                  # never served from one's stale memory


# The Agents SDK runs as a script in a process of its own (tests/agents_sdk.py).
_SESSION_SCRIPT = """
import asyncio, sys
import openai
from agents.memory import OpenAIConversationsSession

async def main(url, key):
    client = openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=0)
    session = OpenAIConversationsSession(openai_client=client)
    await session.add_items([{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4"}]
                            + [{"role": "user", "content": str(n)} for n in range(21)])   # two batches
    items = await session.get_items()
    assert len(items) == 23 and items[0]["content"][0]["text"] == "What is 2 + 2?", items[:2]
    assert [i["content"][0]["text"] for i in await session.get_items(limit=2)] == ["19", "20"]
    popped = await session.pop_item()
    assert popped["content"][0]["text"] == "20" and len(await session.get_items()) == 22
    conversation_id = session.session_id
    await session.clear_session()
    try:
        await client.conversations.retrieve(conversation_id)
        raise AssertionError("the cleared conversation is still there")
    except openai.NotFoundError:
        pass
    print("session ok")

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_the_agents_sdk_session(servers, tmp_path):
    assert "session ok" in run_agents_sdk(_SESSION_SCRIPT, [servers[0].v1, KEYS["alice"]], tmp_path)


def test_a_response_made_on_one_process_is_continued_and_deleted_on_the_other(servers):
    one, two = _client(servers[0]), _client(servers[1])
    first = one.responses.create(model="tiny", input="Hello", max_output_tokens=4, temperature=0)
    assert two.responses.retrieve(first.id).output == first.output           # read through the shared Redis
    later = two.responses.create(model="tiny", input="Again", previous_response_id=first.id, max_output_tokens=4,
                                 temperature=0)
    items = [i.type for i in two.responses.input_items.list(later.id, order="asc")]
    assert later.status in ("completed", "incomplete") and items == ["message"]
    assert later.usage.input_tokens > first.usage.input_tokens             # the first turn is the head
    with pytest.raises(openai.NotFoundError):
        _client(servers[1], "bob").responses.retrieve(first.id)             # another key: as if unknown
    two.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        one.responses.retrieve(first.id)


def test_a_model_scoped_admin_touches_only_its_models_records(servers):
    mine = _client(servers[0]).responses.create(model="tiny", input="Hello", max_output_tokens=2, temperature=0)
    scoped = {"Authorization": f"Bearer {KEYS['scoped']}"}                 # admin of tiny2 only
    for method, path in (("GET", ""), ("GET", "/input_items"), ("POST", "/cancel"), ("DELETE", "")):
        refused = httpx.request(method, f"{servers[1].v1}/responses/{mine.id}{path}", headers=scoped)
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found", (method, path)
    assert _client(servers[1], "root").responses.retrieve(mine.id).id == mine.id     # an admin of every model
    assert _client(servers[1], "alice").responses.retrieve(mine.id).id == mine.id   # nothing was deleted


def test_an_admin_cancel_on_another_gateway_keeps_the_owner(servers, redis_server):
    """A queued background response that no gateway here runs (its own gateway has gone): root cancels it."""
    import asyncio

    from conch.gateway.records import RecordStore

    response = {"id": "resp_queued_elsewhere", "object": "response", "status": "queued", "background": True,
                "model": "tiny", "output": []}

    async def put() -> None:
        store = RecordStore(redis_url=redis_server.url)
        await store.put("response", response["id"], "alice", {"response": response, "input_items": [],
                                                               "context": []}, model="tiny")
        await store.close()

    asyncio.run(put())
    cancelled = httpx.post(f"{servers[1].v1}/responses/{response['id']}/cancel",
                           headers={"Authorization": f"Bearer {KEYS['root']}"})
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    owner_sees = httpx.get(f"{servers[0].v1}/responses/{response['id']}",
                           headers={"Authorization": f"Bearer {KEYS['alice']}"})
    assert owner_sees.status_code == 200 and owner_sees.json()["status"] == "cancelled"


def test_two_gateways_with_redis_stalled_lose_no_acknowledged_item(servers, redis_server):
    one, two = _client(servers[0]), _client(servers[1])
    conv = one.conversations.create(items=[{"role": "user", "content": "first"}])
    assert two.conversations.retrieve(conv.id).id == conv.id
    acknowledged = ["first"]
    with redis_server.stalled():
        for n, server in enumerate(servers * 2):
            added = httpx.post(f"{server.v1}/conversations/{conv.id}/items", timeout=30,
                               json={"items": [{"role": "user", "content": f"during-{n}"}]},
                               headers={"Authorization": f"Bearer {KEYS['alice']}"})
            assert added.status_code in (200, 503), added.text              # a 503 acknowledges nothing
            acknowledged += [f"during-{n}"] if added.status_code == 200 else []
    time.sleep(1.2)                                         # past the Redis links' one-second break
    two.conversations.items.create(conv.id, items=[{"role": "user", "content": "after-two"}])
    one.conversations.items.create(conv.id, items=[{"role": "user", "content": "after-one"}])
    listed = {i.content[0].text for i in two.conversations.items.list(conv.id, limit=100)}
    assert set(acknowledged) | {"after-one", "after-two"} <= listed


def test_a_response_deleted_on_one_gateway_is_never_served_by_the_other(servers, redis_server):
    one, two = _client(servers[0]), _client(servers[1])
    first = one.responses.create(model="tiny", input="Hello", max_output_tokens=2, temperature=0)
    assert two.responses.retrieve(first.id).id == first.id
    one.responses.delete(first.id)
    with redis_server.stalled():
        served = httpx.get(f"{servers[1].v1}/responses/{first.id}", timeout=30,
                           headers={"Authorization": f"Bearer {KEYS['alice']}"})
        continued = httpx.post(f"{servers[1].v1}/responses", timeout=30, headers={
            "Authorization": f"Bearer {KEYS['alice']}"}, json={"model": "tiny", "input": "Again",
                                                               "previous_response_id": first.id,
                                                               "max_output_tokens": 2})
    assert served.status_code == continued.status_code == 503
    time.sleep(1.2)                                         # past the Redis links' one-second break
    with pytest.raises(openai.NotFoundError):
        two.responses.retrieve(first.id)


def test_metrics_show_the_record_store(servers):
    text = httpx.get(f"{servers[0].url}/metrics", headers={"Authorization": f"Bearer {KEYS['root']}"}).text
    assert "conch_record_store_redis_up 1" in text
    assert 'conch_record_store_memory_bytes{tier="redis"}' in text


def test_redis_down_is_a_503_for_what_only_redis_held(servers, redis_server):
    """Last in the module: it stops the shared Redis (and starts a fresh, empty one)."""
    one, two = _client(servers[0]), _client(servers[1])
    conv = one.conversations.create(items=[{"role": "user", "content": "kept"}])
    redis_server.stop()
    try:
        for server in servers:                                              # Redis holds it: no stale copy
            refused = httpx.get(f"{server.v1}/conversations/{conv.id}",
                                headers={"Authorization": f"Bearer {KEYS['alice']}"}, timeout=30)
            assert refused.status_code == 503 and int(refused.headers["retry-after"]) >= 1
            assert refused.json()["error"]["code"] == "service_unavailable"
        during = one.conversations.create(items=[{"role": "user", "content": "during"}])   # kept in memory
        assert [i.content[0].text for i in one.conversations.items.list(during.id)] == ["during"]
        metrics = httpx.get(f"{servers[0].url}/metrics", headers={"Authorization": f"Bearer {KEYS['root']}"}).text
        assert "conch_record_store_redis_up 0" in metrics
        assert int(re.search(r"^conch_record_store_degraded_writes (\d+)", metrics, re.M).group(1)) >= 1
    finally:
        redis_server.restart()                             # a fresh, empty Redis
    time.sleep(1.2)                                        # past the Redis links' one-second break
    assert [i.content[0].text for i in one.conversations.items.list(during.id)] == ["during"]   # flushes it
    assert [i.content[0].text for i in two.conversations.items.list(during.id)] == ["during"]
