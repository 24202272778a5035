"""A loopback proxy between an agent program and Conch, for tests only: it forwards every request as it came,
except that a `force` policy may add to a request's body the fields that steer the real engine (a forced
tool_choice, a tool schema that admits one argument set, a structured-output format), and it records each
exchange (path, the body as the program sent it, the status and content type Conch answered). A WebSocket on a
path is relayed frame by frame, each `response.create` event forced and recorded as an exchange (status 101,
content type "websocket", and the type of the last event Conch sent for it).

A random-weights model cannot decide to call a tool; these fields make the engine's constrained decoding write
the call, and then an answer chosen from what the tool returned, while everything else (the program's prompt,
its tools, its stream parsing, its tool runs) stays the program's own."""
from __future__ import annotations

import asyncio
import copy
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from websockets.asyncio.client import ClientConnection, connect

from tests.conftest import free_port

Force = Callable[[str, dict[str, Any]], dict[str, Any]]   # (path, body as sent) -> body forwarded
_HOP = {"host", "content-length", "transfer-encoding", "connection", "content-encoding", "accept-encoding"}


@dataclass
class Exchange:
    path: str
    body: dict[str, Any]         # as the program sent it
    forwarded: dict[str, Any]    # after the policy
    status: int = 0
    content_type: str = ""
    last_event: str = ""         # a WebSocket exchange's: the type of the last event Conch sent for it


@dataclass
class ForcingProxy:
    upstream: str
    force: Force
    exchanges: list[Exchange] = field(default_factory=list)
    url: str = ""
    _server: uvicorn.Server | None = None

    def app(self) -> Starlette:
        client = httpx.AsyncClient(base_url=self.upstream, timeout=None)

        async def forward(request: Request) -> Response:
            raw = await request.body()
            body = json.loads(raw) if raw and request.method == "POST" else {}
            sent = self.force(request.url.path, copy.deepcopy(body)) if body else body
            exchange = Exchange(request.url.path, body, sent)
            self.exchanges.append(exchange)
            headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
            upstream = client.build_request(request.method, request.url.path, params=request.query_params,
                                            headers=headers, content=json.dumps(sent) if body else raw)
            reply = await client.send(upstream, stream=True)
            exchange.status, exchange.content_type = reply.status_code, reply.headers.get("content-type", "")
            kept = {k: v for k, v in reply.headers.items() if k.lower() not in _HOP}
            return StreamingResponse(reply.aiter_raw(), status_code=reply.status_code, headers=kept,
                                     background=None)

        return Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST", "DELETE"]),
                                 WebSocketRoute("/{path:path}", self._relay)])

    async def _relay(self, socket: WebSocket) -> None:
        path = socket.url.path
        headers = {k: v for k, v in socket.headers.items()
                   if k.lower() not in _HOP | {"upgrade"} and not k.lower().startswith("sec-websocket")}
        async with connect(self.upstream.replace("http", "ws", 1) + path, additional_headers=headers,
                           max_size=None) as upstream:
            await socket.accept()
            ends = [asyncio.ensure_future(self._up(socket, upstream, path)),
                    asyncio.ensure_future(self._down(socket, upstream))]
            await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
            for task in ends:
                task.cancel()

    async def _up(self, socket: WebSocket, upstream: ClientConnection, path: str) -> None:
        while True:
            event = json.loads(await socket.receive_text())
            if event.get("type") == "response.create":
                sent = self.force(path, copy.deepcopy(event))
                self.exchanges.append(Exchange(path, event, sent, 101, "websocket"))
                event = sent
            await upstream.send(json.dumps(event))

    async def _down(self, socket: WebSocket, upstream: ClientConnection) -> None:
        async for frame in upstream:
            if self.exchanges:
                self.exchanges[-1].last_event = json.loads(frame).get("type", "")
            await socket.send_text(frame if isinstance(frame, str) else frame.decode())

    def __enter__(self) -> "ForcingProxy":
        port = free_port()
        self._server = uvicorn.Server(uvicorn.Config(self.app(), host="127.0.0.1", port=port, log_level="warning"))
        threading.Thread(target=self._server.run, daemon=True).start()
        deadline = time.monotonic() + 30
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.should_exit = True


def one_of(names: list[str]) -> dict[str, Any]:
    """A JSON schema whose only documents are {"file": NAME} for NAME in `names`."""
    return {"type": "object", "properties": {"file": {"type": "string", "enum": names}}, "required": ["file"],
            "additionalProperties": False}


def listed_names(output: str) -> list[str]:
    """The file names (NAME.EXT) a listing printed one a line, as `ls` does into a pipe; a tool's own header
    lines (Codex's `Output:`, `Wall time: ...`) are not names."""
    return re.findall(r"^[\w-]+\.\w+$", output, flags=re.MULTILINE)
