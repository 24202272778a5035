"""WebSocket mode on /v1/responses (gateway/openai/responses/socket.py): a real `conch serve` on loopback with a
tiny random model and a keys file, driven by the `websockets` client and the openai SDK's `responses.connect()`.
Responses run one after another on one socket and chain without a stored record; a bad event is an error event
and the socket stays open; the key is checked at the handshake and each response against its models and rate
limits (a limit answers the event, then closes with 1013); a client that hangs up leaves its response stored
incomplete."""
from __future__ import annotations

import asyncio
import json
import time

import httpx
import openai
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.conftest import start_server, write_repository

KEYS = """keys:
  - {key: sk-open, name: open}
  - {key: sk-other-model, name: other, models: [elsewhere]}
  - {key: sk-few, name: few, rpm: 2}
"""
TERMINAL = ("response.completed", "response.incomplete", "response.failed")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 4}})
    (root / "keys.yaml").write_text(KEYS)
    server = start_server(["--model-repository", str(root), "--api-keys-file", str(root / "keys.yaml")], root)
    yield server
    server.stop()


def _socket(server, key: str | None = "sk-open"):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return connect(server.url.replace("http://", "ws://") + "/v1/responses", additional_headers=headers,
                   open_timeout=30)


async def _create(ws: ClientConnection, **body) -> list[dict]:
    """One response.create; its events up to the terminal one (or the error event that refused it)."""
    await ws.send(json.dumps({"type": "response.create", "model": "tiny", "max_output_tokens": 4, **body}))
    events = []
    while not events or events[-1]["type"] not in (*TERMINAL, "error"):
        events.append(json.loads(await asyncio.wait_for(ws.recv(), 120)))
    return events


async def test_responses_run_in_turn_and_chain_on_the_socket_without_a_record(server):
    async with _socket(server) as ws:
        first = await _create(ws, input="hi", store=False)
        second = await _create(ws, input=[{"role": "user", "content": "again"}], store=False,
                               previous_response_id=first[-1]["response"]["id"])
        stale = await _create(ws, input="more", store=False, previous_response_id=first[-1]["response"]["id"])
        third = await _create(ws, input="and on", store=False, previous_response_id=second[-1]["response"]["id"])
    for events in (first, second, third):
        assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
        assert events[-1]["type"] in TERMINAL[:2]
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        assert {e["response"]["id"] for e in events if "response" in e} == {events[0]["response"]["id"]}
    parts = [part for item in first[-1]["response"]["output"] if item["type"] == "message" for part in item["content"]]
    assert parts and all(p["annotations"] == [] and p["logprobs"] == [] for p in parts)     # Open Responses' shape
    one, two = first[-1]["response"]["usage"], second[-1]["response"]["usage"]
    assert two["input_tokens"] > one["input_tokens"] + one["output_tokens"]      # the first turn is its head
    # only the socket's most recent response is kept: an older unstored id is not found, and the socket goes on
    assert stale[-1] == {"type": "error", "status": 400, "error": {
        "message": f"Previous response with id '{first[-1]['response']['id']}' not found.",
        "type": "invalid_request_error", "param": "previous_response_id", "code": "previous_response_not_found"}}
    async with httpx.AsyncClient(headers={"Authorization": "Bearer sk-open"}) as client:
        assert (await client.get(f"{server.v1}/responses/{first[-1]['response']['id']}")).status_code == 404


async def test_a_failed_continuation_evicts_the_context_it_named(server):
    """Open Responses' 'failed continuation evicts cache': a store:false continuation refused (here an unknown
    field) drops the head it named; naming it again is previous_response_not_found, a fresh turn still runs."""
    async with _socket(server) as ws:
        first = await _create(ws, input="hi", store=False)
        head = first[-1]["response"]["id"]
        failed = await _create(ws, input="on", store=False, previous_response_id=head, bogus=1)
        again = await _create(ws, input="on", store=False, previous_response_id=head)
        fresh = await _create(ws, input="start over", store=False)
    assert failed[-1]["type"] == "error" and failed[-1]["error"]["param"] == "bogus"
    assert again[-1]["type"] == "error" and again[-1]["error"]["code"] == "previous_response_not_found"
    assert fresh[-1]["type"] in TERMINAL[:2]


async def test_a_warm_up_generates_nothing_and_can_be_continued(server):
    async with _socket(server) as ws:
        warm = await _create(ws, input="the shared prefix", store=False, generate=False)
        assert warm[-1]["type"] == "response.completed" and warm[-1]["response"]["output"] == []
        turn = await _create(ws, input="go", store=False, previous_response_id=warm[-1]["response"]["id"])
    assert turn[-1]["type"] in TERMINAL[:2]


async def test_a_bad_event_is_an_error_event_and_the_socket_stays_open(server):
    async with _socket(server) as ws:
        answers = []
        for frame in ("{not json", json.dumps(["a list"]), json.dumps({"type": "session.update"}),
                      json.dumps({"type": "response.create", "model": "tiny", "input": "x", "bogus": 1}),
                      json.dumps({"type": "response.create", "model": "tiny", "input": "x", "background": True})):
            await ws.send(frame)
            answers.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
        await ws.send(json.dumps({"type": "response.processed", "response_id": "resp_x"}))   # no answer
        after = await _create(ws, input="still here")
    assert [(a["type"], a["status"], a["error"]["code"], a["error"]["param"]) for a in answers] == [
        ("error", 400, "invalid_json", None), ("error", 400, "invalid_value", "type"),
        ("error", 400, "invalid_value", "type"), ("error", 400, "unsupported_parameter", "bogus"),
        ("error", 400, None, "background")]
    assert after[0]["type"] == "response.created" and after[-1]["type"] in TERMINAL[:2]


async def test_the_key_is_checked_at_the_handshake_and_each_response_against_its_models(server):
    for key in (None, "sk-wrong"):
        with pytest.raises(InvalidStatus) as refused:
            async with _socket(server, key):
                pass
        assert refused.value.response.status_code == 401
        assert json.loads(refused.value.response.body)["error"]["code"] == "invalid_api_key"
    async with _socket(server, "sk-other-model") as ws:
        events = await _create(ws, input="hi")
    assert events == [{"type": "error", "status": 404, "error": {
        "message": "The model 'tiny' does not exist", "type": "invalid_request_error", "param": "model",
        "code": "model_not_found"}}]


async def test_a_rate_limit_is_an_error_event_then_a_close_to_retry_later(server):
    async with _socket(server, "sk-few") as ws:
        answered = [(await _create(ws, input="hi"))[-1] for _ in range(3)]
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 30)
    assert [a["type"] in TERMINAL[:2] for a in answered] == [True, True, False]
    assert answered[2]["status"] == 429 and answered[2]["error"]["code"] == "rate_limit_exceeded"
    assert int(answered[2]["headers"]["Retry-After"]) >= 1
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013


async def test_a_client_that_hangs_up_leaves_its_response_stored_incomplete(server):
    async with _socket(server) as ws:
        await ws.send(json.dumps({"type": "response.create", "model": "tiny", "input": "go on",
                                  "max_output_tokens": 4000}))
        created = json.loads(await ws.recv())
        while json.loads(await ws.recv())["type"] != "response.output_text.delta":
            pass
    rid = created["response"]["id"]
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(headers={"Authorization": "Bearer sk-open"}) as client:
        while time.monotonic() < deadline:
            stored = (await client.get(f"{server.v1}/responses/{rid}")).json()
            if stored.get("status") == "incomplete":
                break
            await asyncio.sleep(0.2)
    assert stored["status"] == "incomplete" and stored["incomplete_details"] == {"reason": "client_disconnected"}
    assert stored["output"] and stored["output"][-1]["type"] == "message"        # what it had written


async def test_the_openai_sdk_reads_every_event_and_chains_on_the_socket(server):
    client = openai.AsyncOpenAI(base_url=server.v1, api_key="sk-open", max_retries=0)
    seen: list[tuple[str, str]] = []
    async with client.responses.connect() as conn:
        ends = []
        for previous in (None, "resp_unknown", "first"):
            await conn.response.create(model="tiny", input="hi", max_output_tokens=4, store=False,
                                       previous_response_id=ends[0].response.id if previous == "first" else previous)
            async for event in conn:
                seen.append((type(event).__name__, event.type))
                if event.type in (*TERMINAL, "error"):
                    ends.append(event)
                    break
    assert ends[0].type in TERMINAL[:2] and ends[1].type == "error" and ends[2].type in TERMINAL[:2]
    assert ends[1].status == 400 and ends[1].error.code == "previous_response_not_found"
    assert ends[2].response.usage.input_tokens > ends[0].response.usage.input_tokens
    assert all(kind.startswith("Response") and "Ws" in kind for kind, _ in seen), seen    # the SDK's own types
