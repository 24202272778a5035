"""Upstreams for the openai backend's tests and bench that a real model cannot play: one that never
answers (a socket that accepts and stays silent), one that always answers 429, and an echo server that
answers every chat or completion at once with a fixed text (plain and streamed), each on a free loopback
port in a thread of this process. Behaviour drills use a real `conch serve` upstream instead."""
from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass

from tests.conftest import free_port

ECHO_TEXT = "Hello from the echo upstream."
ECHO_USAGE = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
TRACEPARENTS: list[str | None] = []      # the echo server's requests' W3C traceparent headers, in order


@dataclass
class ThreadServer:
    url: str                # http://127.0.0.1:PORT/v1
    stop: object


def silent_server() -> ThreadServer:
    """Accepts connections, reads nothing, answers nothing, until stopped."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not done.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()

    def stop() -> None:
        done.set()
        for s in held + [listener]:
            s.close()
    return ThreadServer(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", stop)


def _rate_limited_app():
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def refuse(request):
        body = {"error": {"message": "upstream quota exhausted", "type": "requests", "param": None,
                          "code": "rate_limit_exceeded"}}
        return JSONResponse(body, status_code=429, headers={"Retry-After": "7"})
    return Starlette(routes=[Route("/v1/chat/completions", refuse, methods=["POST"]),
                             Route("/v1/completions", refuse, methods=["POST"])])


def _echo_app():
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    def chunk(chat: bool, text: str | None, finish: str | None, usage=None) -> str:
        choice = ({"index": 0, "delta": {"content": text} if text else {}, "finish_reason": finish} if chat
                  else {"index": 0, "text": text or "", "finish_reason": finish})
        body = {"id": "echo", "object": "chat.completion.chunk" if chat else "text_completion", "created": 0,
                "model": "echo", "choices": [] if usage else [choice], "usage": usage}
        return f"data: {json.dumps(body)}\n\n"

    async def answer(request):
        chat = request.url.path.endswith("/chat/completions")
        TRACEPARENTS.append(request.headers.get("traceparent"))
        body = await request.json()
        if body.get("stream"):
            events = [chunk(chat, ECHO_TEXT, None), chunk(chat, None, "stop"), chunk(chat, None, None, ECHO_USAGE),
                      "data: [DONE]\n\n"]
            return StreamingResponse(iter(events), media_type="text/event-stream")
        choice = ({"index": 0, "message": {"role": "assistant", "content": ECHO_TEXT}, "finish_reason": "stop"}
                  if chat else {"index": 0, "text": ECHO_TEXT, "finish_reason": "stop"})
        return JSONResponse({"id": "echo", "object": "chat.completion" if chat else "text_completion",
                             "created": 0, "model": "echo", "choices": [choice], "usage": ECHO_USAGE})
    return Starlette(routes=[Route("/v1/chat/completions", answer, methods=["POST"]),
                             Route("/v1/completions", answer, methods=["POST"])])


def _serve(app) -> ThreadServer:
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)

    def stop() -> None:
        server.should_exit = True
        thread.join(10)
    return ThreadServer(f"http://127.0.0.1:{port}/v1", stop)


def rate_limited_server() -> ThreadServer:
    return _serve(_rate_limited_app())


def echo_server() -> ThreadServer:
    return _serve(_echo_app())


def metric(server_url: str, name: str, api_key: str | None = None, **labels: str) -> float:
    """One sample of a server's /metrics (0 when absent), matched by name and the given labels; `api_key` is a
    key with the metrics role, which a server with keys asks for (a refused scrape raises, never reads 0)."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    response = httpx.get(f"{server_url}/metrics", headers=headers, timeout=10)
    response.raise_for_status()
    for line in response.text.splitlines():
        if line.startswith(name) and (line[len(name)] in "{ ") and \
                all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def serve_echo(port: int) -> None:
    """The echo upstream in a process of its own (the bench): `python -m tests.fake_upstreams PORT`."""
    import uvicorn

    uvicorn.run(_echo_app(), host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    import sys

    serve_echo(int(sys.argv[1]))
