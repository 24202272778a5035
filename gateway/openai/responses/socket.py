"""WebSocket mode on /v1/responses (OpenAI's Responses WebSocket mode; Codex CLI's with `supports_websockets =
true` on its provider): one socket, many responses, run one at a time in the order their events came.

    client -> {"type": "response.create", ...POST /v1/responses' body, without stream and background}
    server -> that response's events, as a stream carries them (created, in_progress, the output's events,
              then response.completed / .incomplete / .failed; sequence_number from 0), one JSON text frame each
    client -> {"type": "response.create", "previous_response_id": <its id>, "input": [the new items], ...}

The key is the handshake's (`Authorization`, or `x-api-key`): an unknown one is refused before the upgrade, an
HTTP 401. Each response.create is checked like a POST (the key's models, its rate limits). A request that fails
before its first event (bad JSON, an unknown field, an unknown previous_response_id, a model the key may not
use) answers an `error` event, `{"type": "error", "status", "error": {"type", "code", "message", "param"}}`,
and the socket stays open; a rate limit or overload answers the event, then closes the socket with 1013 (try
again later): the client reconnects when it retries. A client that hangs up cancels the response in flight,
which is stored `incomplete` (client_disconnected) as a streamed one is.

The socket keeps its most recent response's context in memory (OpenAI's connection-local cache), so a
`previous_response_id` naming it continues it without a stored record: `store: false` chains work on one
socket. A continuation that fails (refused before its first event, or ending `response.failed`) evicts the
context it named: a retry naming it again is `previous_response_not_found`, as on a new socket.
`generate: false` (a warm-up) answers a completed response with no output, which the next request may
continue. `response.processed` (Codex's acknowledgement of a response it has read) needs no answer."""
from __future__ import annotations

import asyncio
import json
from contextlib import aclosing
from typing import Any, AsyncGenerator

from fastapi import APIRouter, WebSocket
from pydantic import ValidationError
from starlette.responses import JSONResponse

from conch.gateway.aliases import resolve_model
from conch.gateway.auth import Gate, Unauthorized, credentials
from conch.gateway.choices import Choice
from conch.gateway.errors import APIError, body_error, openai_body, to_api_error
from conch.gateway.openai.responses import mcp_run
from conch.gateway.openai.responses.output import usage_dict
from conch.gateway.openai.responses.run import (Prepared, finish_records, generation, numbered, prepare,
                                                run_events)
from conch.gateway.openai.responses.schemas import ResponsesRequest
from conch.gateway.state import conch_state, wants_cache
from conch.gateway.streaming import prime

router = APIRouter()

QUEUED = 32                               # events waiting behind the running response
TRY_AGAIN_LATER = 1013                    # the close code after a rate limit or overload
RETRY_LATER = (429, 503)
ACKNOWLEDGED = frozenset({"response.processed"})
_ENVELOPE = ("type", "generate", "stream_id")        # the event's own fields, not the request body's


@router.websocket("/v1/responses")
async def responses_socket(socket: WebSocket) -> None:
    gate: Gate | None = getattr(socket.app.state, "gate", None)
    if gate is not None:
        try:
            gate.authenticate(credentials(socket.headers))
        except Unauthorized as exc:
            await socket.send_denial_response(JSONResponse(openai_body(to_api_error(exc)), status_code=401))
            return
    await socket.accept()
    await Session(socket, gate).serve()


class Session:
    """One socket's responses: `heads` holds the most recent response's context (its input and output), by id."""

    def __init__(self, socket: WebSocket, gate: Gate | None) -> None:
        self.socket, self.gate = socket, gate
        self.heads: dict[str, list[dict[str, Any]]] = {}

    async def serve(self) -> None:
        """Frames are read while a response runs, so that a hang-up cancels it; they wait their turn in a queue
        (bounded: a client that sends faster than its responses run is read no further until they catch up)."""
        frames: asyncio.Queue[str | bytes] = asyncio.Queue(maxsize=QUEUED)
        reader = asyncio.ensure_future(self._read(frames))
        worker = asyncio.ensure_future(self._work(frames))
        await asyncio.wait({reader, worker}, return_when=asyncio.FIRST_COMPLETED)
        for task in (reader, worker):
            task.cancel()
        await asyncio.gather(reader, worker, return_exceptions=True)

    async def _read(self, frames: asyncio.Queue[str | bytes]) -> None:
        while True:
            message = await self.socket.receive()
            if message["type"] == "websocket.disconnect":
                return
            await frames.put(message.get("text") or message.get("bytes") or b"")

    async def _work(self, frames: asyncio.Queue[str | bytes]) -> None:
        while await self._answer(await frames.get()):
            pass
        await self.socket.close(TRY_AGAIN_LATER)

    async def _answer(self, frame: str | bytes) -> bool:
        """One client event answered; False when the socket is to close (the client should retry later)."""
        named: Any = None
        try:
            event = _event(frame)
            if event["type"] in ACKNOWLEDGED:
                return True
            named = event.get("previous_response_id")
            p, events = await self._start(event)
        except Exception as exc:                       # before the first event: an error event, never a crash
            err = to_api_error(exc)
            self._evict(named)
            await self.socket.send_json(_error_event(err))
            return err.status not in RETRY_LATER
        final: dict[str, Any] = {}
        async with aclosing(events) as running:    # closed however it ends: a hang-up stops the engine
            async for out in numbered(p, running):
                await self.socket.send_json(out)
                final = out.get("response", final)
        if final.get("status") == "failed":
            self._evict(named)
        else:
            self.heads = {p.response_id: p.context + final.get("output", [])}
        return True

    def _evict(self, named: Any) -> None:
        """A continuation that failed drops the context it named (OpenAI's and Open Responses' rule): the
        client starts over with its whole input, never from a head a failed turn may have half-used."""
        if isinstance(named, str):
            self.heads.pop(named, None)

    async def _start(self, event: dict[str, Any]) -> tuple[Prepared, AsyncGenerator[dict[str, Any], None]]:
        body = _request(event)
        if self.gate is not None:                      # the key's models and rate limits, as a POST's guard
            await self.gate.check(credentials(self.socket.headers), resolve_model(self.socket, body.model))
        p = await prepare(body, self.socket, self.heads)
        if event.get("generate") is False:
            return p, _warm_up(p)
        if p.mcp is not None:
            state = conch_state(self.socket)
            run = mcp_run.McpRun(p, state.engine, state.settings.mcp.limits,
                                 getattr(self.socket.app.state, "metrics", None), wants_cache(self.socket))
            return p, await mcp_run.primed(run)
        gen, plan = await generation(p, self.socket, wants_cache(self.socket))
        deltas = conch_state(self.socket).engine.generate(gen)
        return p, run_events(p, plan, await prime(deltas))


def _event(frame: str | bytes) -> dict[str, Any]:
    try:
        event = json.loads(frame)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise APIError(400, "the event is not valid JSON", code="invalid_json") from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise APIError(400, "an event is a JSON object with a 'type'", param="type", code="invalid_value")
    if event["type"] != "response.create" and event["type"] not in ACKNOWLEDGED:
        raise APIError(400, f"unknown event type {event['type']!r}; this socket takes 'response.create'",
                       param="type", code="invalid_value")
    return event


def _request(event: dict[str, Any]) -> ResponsesRequest:
    """The event's body read as a streamed POST's: `stream` is implicit, `background` is not served here."""
    body = {k: v for k, v in event.items() if k not in _ENVELOPE and k != "stream"}
    if body.pop("background", None):
        raise APIError(400, "background responses are not supported in WebSocket mode: POST them",
                       param="background")
    try:
        return ResponsesRequest.model_validate({**body, "stream": True})
    except ValidationError as exc:
        raise body_error(exc) from None


def _error_event(err: APIError) -> dict[str, Any]:
    event = {"type": "error", "status": err.status, **openai_body(err)}
    return {**event, "headers": err.headers} if err.headers else event


async def _warm_up(p: Prepared) -> AsyncGenerator[dict[str, Any], None]:
    """`generate: false`: nothing generated; the response completes empty and its context can be continued."""
    final = await finish_records(p, p.response("completed", output=[], usage=usage_dict(Choice(0))))
    yield {"type": "response.completed", "response": final}
