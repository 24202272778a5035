"""A failure after a stream has started (the backend fails a choice mid-generation): /v1 ends the stream with
one OpenAI error event and no [DONE], which the OpenAI SDK raises as an APIError; /v2 generate_stream ends it
with one `data: {"error": ...}` event. In process, over a fake backend whose last token fails."""
from __future__ import annotations

import json

import httpx
import openai
import pytest

from conch.gateway.app import build_app
from tests.serving_helpers import chat_engine

MAX_TOKENS = 4


def _app():
    engine = chat_engine(backend="transformers")     # an LLM's config: /v2 speaks the LLM tensor contract
    engine.get("m").backend.fail = True
    return build_app(engine, metrics=False)


def _events(text: str) -> list[str]:
    assert text.endswith("\n\n"), text
    return [e.removeprefix("data: ") for e in text.split("\n\n") if e]


@pytest.fixture
def http():
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=_app()), base_url="http://t")


@pytest.mark.parametrize("path,body", [
    ("/v1/completions", {"prompt": "hi"}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
])
async def test_v1_stream_ends_with_one_openai_error_event(http, path, body):
    async with http:
        r = await http.post(path, json={"model": "m", "max_tokens": MAX_TOKENS, "stream": True, **body})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = _events(r.text)
    assert "[DONE]" not in events
    *chunks, last = [json.loads(e) for e in events]
    assert chunks and all("error" not in c for c in chunks)       # the tokens before the failure arrived
    assert set(last) == {"error"} and set(last["error"]) == {"message", "type", "param", "code"}
    assert "boom" in last["error"]["message"] and last["error"]["type"] == "internal_error"


async def test_openai_sdk_raises_the_error_event(http):
    client = openai.AsyncOpenAI(api_key="x", base_url="http://t/v1", http_client=http, max_retries=0)
    texts = []
    with pytest.raises(openai.APIError, match="boom"):
        async for chunk in await client.completions.create(model="m", prompt="hi", max_tokens=MAX_TOKENS,
                                                           stream=True):
            texts.append(chunk.choices[0].text)
    assert len(texts) == MAX_TOKENS - 1
    await client.close()


async def test_v2_generate_stream_ends_with_one_error_event(http):
    async with http:
        r = await http.post("/v2/models/m/generate_stream",
                            json={"text_input": "hi", "parameters": {"max_tokens": MAX_TOKENS}})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    *chunks, last = [json.loads(e) for e in _events(r.text)]
    assert chunks and all("error" not in c and c["text_output"] for c in chunks)
    assert last == {"error": last["error"]} and "boom" in last["error"]
