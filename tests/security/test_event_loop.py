"""Nothing heavy runs on the event loop: while 4 MB prompts (on /v1 completions, /v1 chat and /v2 generate),
a long prompt that must be tokenized whole, and a flood of 200 requests are in flight, /v2/health/live
answers and a normal request completes; each heavy prompt gets its 400 (`context_length_exceeded` on /v1).
A chat request's tools are checked on a worker thread, never on the server's event loop.

No timed asserts: the clients' timeouts only detect a server that stopped answering (before the fix each 4 MB
prompt held the loop for seconds while it was tokenized, and there are five of them; health is probed until
they are answered).
"""
from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from tests.conftest import start_inprocess, start_server, write_repository

HUGE = "lorem ipsum dolor sit amet " * (4 * 2**20 // 27)          # ~4 MB
LONG = "a b c d " * 12_000                                          # ~96 KB: under the cheap bound, too long


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 16}})
    server = start_server(["--model-repository", str(root), "--max-queue-size", "0"], root)   # unbounded: all run
    yield server
    server.stop()


def _heavy(client: httpx.AsyncClient) -> list:
    def completion(prompt: str):
        return client.post("/v1/completions", json={"model": "tiny", "prompt": prompt, "max_tokens": 4})
    chat = client.post("/v1/chat/completions", json={"model": "tiny", "max_tokens": 4,
                                                     "messages": [{"role": "user", "content": HUGE}]})
    v2 = [client.post("/v2/models/tiny/generate", json={"text_input": HUGE, "parameters": {"max_tokens": 4}})
          for _ in range(2)]
    return [completion(HUGE), completion(HUGE), completion(LONG), chat, *v2]


def _flood(client: httpx.AsyncClient) -> list:
    return [client.post("/v2/models/tiny/generate",
                        json={"text_input": f"flood {i}", "parameters": {"max_tokens": 2}})
            for i in range(200)]


async def _drill(server):
    limits = httpx.Limits(max_connections=300, max_keepalive_connections=300)
    async with httpx.AsyncClient(base_url=server.url, timeout=300, limits=limits) as client, \
            httpx.AsyncClient(base_url=server.url, timeout=httpx.Timeout(300, connect=60)) as probe:
        heavy = [asyncio.ensure_future(c) for c in _heavy(client)]
        flood = [asyncio.ensure_future(c) for c in _flood(client)]
        await asyncio.sleep(0)                      # every request is on its way before the probes go
        live = []
        while len(live) < 10 and not all(h.done() for h in heavy):    # probe while the heavy ones are in flight
            live.append(await probe.get("/v2/health/live", timeout=20))
            await asyncio.sleep(0.5)
        normal = await probe.post("/v1/completions", json={"model": "tiny", "prompt": "Hello", "max_tokens": 5,
                                                           "ignore_eos": True})
        return live, normal, await asyncio.gather(*heavy), await asyncio.gather(*flood)


def test_health_and_a_normal_request_answer_beside_huge_prompts_and_a_flood(server):
    live, normal, heavy, flood = asyncio.run(_drill(server))
    assert all(r.status_code == 200 for r in live)
    assert normal.status_code == 200 and normal.json()["usage"]["completion_tokens"] == 5
    for r in heavy:
        assert r.status_code == 400, r.text[:300]
        error = r.json()["error"]
        if r.request.url.path.startswith("/v1"):
            assert error["code"] == "context_length_exceeded" and error["param"] in ("prompt", "messages")
        else:
            assert "maximum context length" in error
    for i, r in enumerate(flood):
        assert r.status_code == 200 and r.json()["text_output"].startswith(f"flood {i}")


def test_tools_are_checked_off_the_event_loop(tmp_path, monkeypatch):
    import conch.gateway.conversation.tools as tools_module

    checked_on: list[threading.Thread] = []
    check = tools_module.validate
    monkeypatch.setattr(tools_module, "validate", lambda spec: (checked_on.append(threading.current_thread()),
                                                                check(spec)))
    root = write_repository(tmp_path / "repo", {"tiny": {"weights": "builtin:tiny", "dtype": "float32"}})
    server = start_inprocess(root)              # uvicorn's event loop runs in server.thread
    try:
        tools = [{"type": "function", "function": {"name": f"f{i}", "parameters": {
            "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}} for i in range(3)]
        r = httpx.post(f"{server.v1}/chat/completions", timeout=120, json={
            "model": "tiny", "messages": [{"role": "user", "content": "hi"}], "tools": tools,
            "tool_choice": "required", "max_tokens": 8})
    finally:
        server.stop()
    assert r.status_code == 200, r.text
    assert len(checked_on) == 3 and server.thread not in checked_on
