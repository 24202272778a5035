"""A non-streamed /v1 client that hangs up while its request still waits in the admission queue aborts it
there: the request leaves the queue, never reaches the backend, and is counted as cancelled. Driven at the
ASGI level (in process, over a fake backend), where the disconnect can be sent at a chosen moment."""
from __future__ import annotations

import asyncio
import json

import pytest

from conch.gateway.app import build_app
from tests.serving_helpers import asgi_post, chat_engine

BODIES = {"/v1/completions": {"model": "m", "prompt": "hi", "max_tokens": 2},
          "/v1/chat/completions": {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}}


class Traces:
    def __init__(self) -> None:
        self.seen = []

    def on_finish(self, trace) -> None:
        self.seen.append(trace)


async def _call(app, path: str, hang_up: asyncio.Event) -> list[dict]:
    """One POST; the client disconnects once `hang_up` is set. Returns the ASGI messages the app sent."""
    messages: list[dict] = []

    async def send(message: dict) -> None:
        messages.append(message)

    await asgi_post(app, path, BODIES[path], hang_up, send)
    return messages


async def _until(predicate, tries: int = 2000) -> None:
    for _ in range(tries):
        if predicate():
            return
        await asyncio.sleep(0.001)


@pytest.mark.parametrize("path", list(BODIES))
async def test_hang_up_while_queued_aborts_a_non_streamed_request(path):
    engine = chat_engine(max_batch_size=1)
    backend, traces = engine.get("m").backend, Traces()
    backend.gate = asyncio.Event()                  # the first request holds the only slot until released
    engine.observers.append(traces)
    app = build_app(engine, metrics=False)
    queue = engine.admission.queue(engine.get("m").config)
    stays, leaves = asyncio.Event(), asyncio.Event()

    first = asyncio.ensure_future(_call(app, path, stays))
    await _until(lambda: backend.calls == 1)
    second = asyncio.ensure_future(_call(app, path, leaves))
    await _until(lambda: queue.pending == 1)
    leaves.set()
    await _until(second.done)
    assert second.done() and second.result()[0]["status"] == 499     # answered, not raised out of the app
    assert queue.pending == 0 and len(traces.seen) == 1 and traces.seen[0].cancelled

    backend.gate.set()
    messages = await first
    assert messages[0]["status"] == 200 and backend.calls == 1
    assert json.loads(messages[-1]["body"])["usage"]["completion_tokens"] == 2
