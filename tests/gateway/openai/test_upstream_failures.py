"""Upstream failure drills through the front Conch: an upstream killed mid-stream (one error event, nothing
hangs), one of two deployments down (no failed request, the dead one cooled down in /metrics), fallbacks,
an upstream that never answers (504 naming the timeout), an upstream's 429 passed through with Retry-After."""
from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest

from tests.conftest import free_port, start_server, write_repository
from tests.fake_upstreams import metric, rate_limited_server, silent_server

MESSAGES = [{"role": "user", "content": "Say something."}]


def _tiny(root):
    return start_server(["--model-repository", str(write_repository(root, {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 8}}))], root)


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory):
    live, victim = _tiny(tmp_path_factory.mktemp("live")), _tiny(tmp_path_factory.mktemp("victim"))
    silent, limited = silent_server(), rate_limited_server()
    yield {"live": live, "victim": victim, "silent": silent, "limited": limited}
    for server in (live, victim, silent, limited):
        server.stop()


@pytest.fixture(scope="module")
def front(tmp_path_factory, upstreams):
    root = tmp_path_factory.mktemp("front")
    dead = f"http://127.0.0.1:{free_port()}/v1"             # nothing listens there
    live = upstreams["live"].v1
    base = {"backend": "openai", "upstream_model": "tiny", "timeout": 30}
    write_repository(root, {
        "victim": {**base, "base_url": upstreams["victim"].v1, "extra_params": True},
        "pair": {**base, "cooldown_failures": 2, "cooldown": 600,
                 "routes": [{"base_url": dead, "name": "dead"}, {"base_url": live, "name": "live"}]},
        "live-only": {**base, "base_url": live},
        "lonely": {**base, "base_url": dead, "fallbacks": ["live-only"]},
        "doomed": {**base, "base_url": dead, "fallbacks": ["dead-too"]},
        "dead-too": {**base, "base_url": f"http://127.0.0.1:{free_port()}/v1"},
        "late": {**base, "base_url": dead, "fallbacks": ["slow"]},
        "slow": {**base, "base_url": upstreams["silent"].url, "timeout": 1},
        "limited": {**base, "base_url": upstreams["limited"].url},
    })
    server = start_server(["--model-repository", str(root)], root)
    yield server
    server.stop()


def _chat(front, model, **extra) -> httpx.Response:
    return httpx.post(f"{front.v1}/chat/completions", timeout=60,
                      json={"model": model, "messages": MESSAGES, "max_tokens": 3, **extra})


def test_one_of_two_deployments_down_fails_no_request(front):
    assert [_chat(front, "pair").status_code for _ in range(6)] == [200] * 6
    assert metric(front.url, "conch_upstream_healthy", model="pair", deployment="dead") == 0   # cooled down
    assert metric(front.url, "conch_upstream_healthy", model="pair", deployment="live") == 1


def test_concurrent_requests_with_a_dead_deployment(front):
    async def run() -> list:
        client = openai.AsyncOpenAI(base_url=front.v1, api_key="none", max_retries=0)
        answers = await asyncio.gather(*[client.chat.completions.create(model="pair", messages=MESSAGES,
                                                                        max_tokens=3) for _ in range(8)])
        await client.close()
        return answers
    answers = asyncio.run(run())
    assert all(a.usage.completion_tokens == 3 for a in answers)


def test_fallback_answers_when_every_deployment_fails(front):
    r = _chat(front, "lonely", temperature=0)
    assert r.status_code == 200 and r.json()["model"] == "lonely"
    assert r.json()["usage"]["completion_tokens"] == 3
    r = _chat(front, "doomed")
    assert r.status_code == 502 and r.json()["error"]["code"] == "bad_gateway"
    assert "fallback 'dead-too'" in r.json()["error"]["message"]


def test_a_fallback_that_times_out_is_504(front):
    """The last upstream tried decides the status: its timeout is a 504, not the first one's 502."""
    r = _chat(front, "late")
    assert r.status_code == 504 and r.json()["error"]["code"] == "gateway_timeout", r.text
    assert "fallback 'slow'" in r.json()["error"]["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_that_never_answers_is_504(front, stream):
    with httpx.Client(base_url=front.v1, timeout=60) as client:
        r = client.post("/chat/completions", json={"model": "slow", "messages": MESSAGES, "stream": stream})
        assert r.status_code == 504
        error = r.json()["error"]
        assert error["code"] == "gateway_timeout" and "did not answer within 1s" in error["message"]
        assert client.post("/chat/completions", json={"model": "live-only", "messages": MESSAGES,
                                                      "max_tokens": 2}).status_code == 200   # same connection


def test_upstream_429_passes_through_with_retry_after(front):
    r = _chat(front, "limited")
    assert r.status_code == 429 and r.headers["retry-after"] == "7"
    assert r.json()["error"]["code"] == "upstream_rate_limited"
    assert "upstream quota exhausted" in r.json()["error"]["message"]
    client = openai.OpenAI(base_url=front.v1, api_key="none", max_retries=0)
    with pytest.raises(openai.RateLimitError):
        client.completions.create(model="limited", prompt="hi", max_tokens=2)


def test_upstream_killed_mid_stream_ends_with_one_error_event(front, upstreams):
    events: list[str] = []
    body = {"model": "victim", "messages": MESSAGES, "max_tokens": 1500, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", f"{front.v1}/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            events.append(line[6:])
            if len(events) == 2:                          # the role chunk and one content chunk are out
                upstreams["victim"].process.kill()
    errors = [e for e in events if e != "[DONE]" and "error" in json.loads(e)]
    assert len(errors) == 1 and events[-1] == errors[0] and "[DONE]" not in events
    assert json.loads(errors[0])["error"]["code"] == "bad_gateway"
    client = openai.OpenAI(base_url=front.v1, api_key="none", max_retries=0)
    with pytest.raises(openai.InternalServerError) as e:  # the victim gone: a 502 before any byte
        client.chat.completions.create(model="victim", messages=MESSAGES, max_tokens=3, stream=True)
    assert e.value.status_code == 502
