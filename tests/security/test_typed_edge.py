"""The third hardening pass's edge cases, over a real server with the tiny model: each was a 500, a 200 that
stored a record every GET then failed on, or a 200 `failed`; each is now a 4xx (or, under overload, a 503 with
Retry-After) in the face's own error shape, naming the field, and the server keeps serving.

- Responses / Conversations inputs of the wrong JSON type (a list where a string belongs, a non-object
  `format`), and NaN / Infinity anywhere in a body;
- grammars and schemas that compile but cannot be served (past llguidance's limits, no finite string, only a
  special token's text), on chat, /v2 generate, /v1/messages and Responses' custom tools;
- a whole (non-streamed) Responses request under overload.
"""
from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.conftest import start_server, write_repository

ALTERNATIVES = "start: " + " | ".join(f'"w{i}"' for i in range(2000))
RESPONSE = {"model": "tiny", "input": "hi", "max_output_tokens": 2}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 4},
        "tiny1": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 1, "max_queue_size": 1}})
    server = start_server(["--model-repository", str(root)], root)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=120) as c:
        yield c


def _raw(client: httpx.Client, path: str, body: str) -> httpx.Response:
    return client.post(path, content=body.encode(), headers={"Content-Type": "application/json"})


def _openai_400(r: httpx.Response, param: str | None) -> dict:
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert error["param"] == param, error
    return error


TYPED = [
    ("/v1/conversations", '{"items":[{"type":["message"],"role":"user","content":"x"}]}', "items.0.type"),
    ("/v1/responses", '{"model":"tiny","input":"hi","tools":[{"type":"custom","name":"c","format":"text"}]}',
     "tools.0.format"),
    ("/v1/responses", '{"model":"tiny","input":[{"type":"message","role":[],"content":"x"}]}', "input.0.role"),
    ("/v1/responses", '{"model":"tiny","input":"hi","tool_choice":{"type":["x"]}}', "tool_choice.type"),
    ("/v1/responses", '{"model":"tiny","input":[{"type":"message","role":"user","content":"hi","id":NaN}]}',
     "input.0.id"),
    ("/v1/responses", '{"model":"tiny","input":"hi","tools":[{"type":"function","name":"f","description":NaN}]}',
     "tools.0.description"),
    ("/v1/responses", '{"model":"tiny","input":[{"role":"user","content":"hi","id":["a"]}]}', "input.0.id"),
    ("/v1/responses", '{"model":"tiny","input":[{"role":"user","content":"hi","status":{"a":1}}]}',
     "input.0.status"),
    ("/v1/responses", '{"model":"tiny","input":[{"role":"user","content":"hi","id":"' + "i" * 300 + '"}]}',
     "input.0.id"),
    ("/v1/responses", '{"model":"tiny","input":[{"type":"mcp_list_tools","server_label":"s","error":1}]}',
     "input.0.error"),
    ("/v1/conversations", '{"items":[{"role":"user","content":"x","id":{"k":1}}]}', "items.0.id"),
    ("/v1/chat/completions", '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"temperature":Infinity}',
     "temperature"),
    ("/v1/chat/completions", '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"top_p":"nan"}', "top_p"),
]


@pytest.mark.parametrize(("path", "body", "param"), TYPED)
def test_a_value_of_the_wrong_type_is_a_400_naming_it(client, path, body, param):
    _openai_400(_raw(client, path, body), param)


def test_nan_is_refused_by_name_on_the_other_faces(client):
    r = _raw(client, "/v1/messages", '{"model":"tiny","max_tokens":2,"temperature":NaN,'
                                     '"messages":[{"role":"user","content":"hi"}]}')
    assert r.status_code == 400 and r.json()["type"] == "error", r.text
    assert "temperature" in r.json()["error"]["message"]
    r = _raw(client, "/v2/models/tiny/generate", '{"text_input":"hi","parameters":{"temperature":-Infinity}}')
    assert r.status_code == 400 and "parameters.temperature" in r.json()["error"], r.text


UNSERVABLE = {          # grammar text -> a word its refusal holds
    ALTERNATIVES: "2000",
    'start: "a"~100000': "too many items",
    'start: x\nx: "a" x': "no finite string",
    "start: start": "no finite string",
}
SPECIAL_ONLY = {"const": "<|im_end|>"}


@pytest.mark.parametrize("grammar", UNSERVABLE)
def test_an_unservable_grammar_is_a_400_on_chat_and_v2(client, grammar):
    r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                                                  "max_tokens": 4, "guided_grammar": grammar})
    assert r.status_code == 400 and r.json()["error"]["code"] in ("invalid_grammar", "invalid_value"), r.text
    assert UNSERVABLE[grammar] in r.json()["error"]["message"].lower()
    r = client.post("/v2/models/tiny/generate", json={"text_input": "hi", "parameters": {
        "max_tokens": 4, "guided_grammar": grammar}})
    assert r.status_code == 400 and UNSERVABLE[grammar] in r.json()["error"].lower(), r.text


@pytest.mark.parametrize("grammar", [*UNSERVABLE])
@pytest.mark.parametrize("stream", [False, True])
def test_an_unservable_custom_tool_grammar_is_a_400_on_responses(client, grammar, stream):
    tool = {"type": "custom", "name": "c", "format": {"type": "grammar", "syntax": "lark", "definition": grammar}}
    r = client.post("/v1/responses", json={**RESPONSE, "tools": [tool], "tool_choice": "required", "stream": stream})
    assert r.status_code == 400, r.text[:300]
    assert UNSERVABLE[grammar] in r.json()["error"]["message"].lower()


def test_a_schema_of_a_special_tokens_text_is_a_400_on_chat_and_messages(client):
    r = client.post("/v1/chat/completions", json={
        "model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SPECIAL_ONLY}}})
    assert r.status_code == 400 and "special token" in r.json()["error"]["message"], r.text
    r = client.post("/v1/messages", json={
        "model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}],
        "output_config": {"format": {"type": "json_schema", "schema": SPECIAL_ONLY}}})
    assert r.status_code == 400 and r.json()["type"] == "error", r.text
    assert "special token" in r.json()["error"]["message"]


def test_a_forced_function_of_a_special_tokens_schema_is_a_400_on_responses(client):
    tool = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {
        "a": SPECIAL_ONLY}, "required": ["a"]}}
    r = client.post("/v1/responses", json={**RESPONSE, "tools": [tool], "tool_choice": {"type": "function",
                                                                                     "name": "f"}})
    assert r.status_code == 400 and "special token" in r.json()["error"]["message"], r.text


def test_a_whole_response_under_overload_is_a_503_with_retry_after(server):
    """tiny1 holds one running request and one queued: of 6 at once, some are refused, each with a 503 and
    Retry-After (never a 200 `failed` response, stored)."""
    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as c:
            body = {"model": "tiny1", "input": "hi", "max_output_tokens": 48}
            return await asyncio.gather(*(c.post("/v1/responses", json=body) for _ in range(6)))
    answers = asyncio.run(run())
    for r in answers:
        if r.status_code == 200:
            assert r.json()["status"] in ("completed", "incomplete"), r.text[:300]
        else:
            assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1, r.text[:300]
            assert r.json()["error"]["type"] == "service_unavailable"
    assert any(r.status_code == 503 for r in answers)
