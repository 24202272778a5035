"""A stored, streamed response and its records when the stream is interrupted: the client leaving mid-stream
(the response is stored `incomplete`, so the id it announced never 404s) and its conversation deleted while
it streams (the stream still ends with a terminal event, response.failed naming the deletion). Driven at the
ASGI level (in process, over a fake backend that holds after its first token), where the disconnect and the
delete can happen at a chosen moment."""
from __future__ import annotations

import asyncio
import json

import httpx

from conch.engine.types import GenerationDelta, RequestStatus, Usage
from conch.gateway.app import build_app
from conch.gateway.openai.responses import run
from tests.serving_helpers import asgi_post, chat_engine


def _app() -> tuple[object, asyncio.Event]:
    """The app, and the event that lets its backend go on after the first token."""
    engine = chat_engine()
    backend = engine.get("m").backend
    go_on = asyncio.Event()

    async def generate(request):
        yield GenerationDelta(request.id, 0, (65,), "A", (), RequestStatus.RUNNING)
        await go_on.wait()
        yield GenerationDelta(request.id, 0, (66,), "B", (), RequestStatus.FINISHED_STOPPED,
                              Usage(len(request.prompt_token_ids), 2))

    backend.generate = generate
    return build_app(engine, metrics=False), go_on


async def _stream(app, body: dict, hang_up: asyncio.Event, first_delta: asyncio.Event) -> list[dict]:
    """POST /v1/responses, streamed; `first_delta` is set at the first text delta, and the client disconnects
    once `hang_up` is set. Returns the events the app sent."""
    events: list[dict] = []

    async def send(message: dict) -> None:
        for line in message.get("body", b"").decode().splitlines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
                if events[-1]["type"] == "response.output_text.delta":
                    first_delta.set()

    await asgi_post(app, "/v1/responses", {**body, "stream": True}, hang_up, send)
    return events


def _client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t/v1")


async def test_a_client_that_leaves_mid_stream_leaves_an_incomplete_response():
    app, _ = _app()
    hang_up, first_delta = asyncio.Event(), asyncio.Event()
    call = asyncio.ensure_future(_stream(app, {"model": "m", "input": "hi"}, hang_up, first_delta))
    await first_delta.wait()
    hang_up.set()
    events = await call
    response_id = events[0]["response"]["id"]
    while run._LEAVING:                                      # the record is written in a task of its own
        await asyncio.gather(*run._LEAVING, return_exceptions=True)
    async with _client(app) as client:
        stored = await client.get(f"/responses/{response_id}")
    assert stored.status_code == 200, stored.text
    body = stored.json()
    assert body["status"] == "incomplete" and body["incomplete_details"] == {"reason": "client_disconnected"}
    assert body["output"][0]["status"] == "incomplete" and body["output"][0]["content"][0]["text"] == "A"


async def test_deleting_its_conversation_ends_the_stream_with_a_terminal_event():
    app, go_on = _app()
    async with _client(app) as client:
        conversation = (await client.post("/conversations", json={})).json()["id"]
        never, first_delta = asyncio.Event(), asyncio.Event()
        call = asyncio.ensure_future(_stream(app, {"model": "m", "input": "hi", "conversation": conversation},
                                             never, first_delta))
        await first_delta.wait()
        assert (await client.delete(f"/conversations/{conversation}")).status_code == 200
        go_on.set()
        events = await call
        assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
        assert "was deleted while this response ran" in events[-1]["response"]["error"]["message"]
        stored = (await client.get(f"/responses/{events[-1]['response']['id']}")).json()
        assert stored["status"] == "failed" and stored["output"][0]["content"][0]["text"] == "AB"
