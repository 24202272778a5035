"""A loopback proxy between an agent program and Conch, for tests only: it forwards every request as it came,
except that a `force` policy may add to a request's body the fields that steer the real engine (a forced
tool_choice, a tool schema that admits one argument set, a structured-output format), and it records each
exchange (path, the body as the program sent it, the status and content type Conch answered).

A random-weights model cannot decide to call a tool; these fields make the engine's constrained decoding write
the call, and then an answer chosen from what the tool returned, while everything else (the program's prompt,
its tools, its stream parsing, its tool runs) stays the program's own."""
from __future__ import annotations

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
from starlette.routing import Route

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

        return Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST", "DELETE"])])

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
