"""Conch in front of another Conch (`conch serve` on loopback, the tiny model) through the openai backend:
pass-through chat and completions, streamed and not, with the openai SDK and LangChain as clients; the
front's keys, limits and cache apply; tools forwarded or prompted; what cannot be sent is a 400."""
from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

from tests.conftest import start_server, write_repository
from tests.fake_upstreams import metric

KEY = "sk-front"
METRICS_KEY = "sk-metrics"           # the metrics role: /metrics of a server with keys wants it
MESSAGES = [{"role": "user", "content": "Say something."}]
TOOLS = [{"type": "function", "function": {           # an enum keeps random weights' arguments short
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}}, "required": ["city"],
                   "additionalProperties": False}}}]


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    root = tmp_path_factory.mktemp("upstream")
    server = start_server(["--model-repository", str(write_repository(root, {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 8}}))], root)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def front(tmp_path_factory, upstream):
    root = tmp_path_factory.mktemp("front")
    base = {"backend": "openai", "base_url": upstream.v1, "upstream_model": "tiny", "timeout": 30,
            "api_key_env": "UPSTREAM_KEY"}
    write_repository(root, {
        "remote": {**base, "tokenizer": "builtin:tiny"},           # counts with the upstream's own tokenizer
        "remote-counted": base,                                     # counts with tiktoken
        "remote-extra": {**base, "extra_params": True},
        "remote-tools": {**base, "supports_tools": True},
    })
    (root / "keys.yaml").write_text(f"keys:\n  - {{key: {KEY}, name: front}}\n"
                                    "  - {key: sk-twice, name: twice, rpm: 2}\n"
                                    "  - {key: sk-other, name: other, models: [remote-tools]}\n"
                                    f"  - {{key: {METRICS_KEY}, name: scraper, metrics: true}}\n")
    server = start_server(["--model-repository", str(root), "--api-keys-file", str(root / "keys.yaml"),
                           "--response-cache", "memory"], root, env={"UPSTREAM_KEY": "sk-upstream-unused"})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(front):
    return openai.OpenAI(base_url=front.v1, api_key=KEY, max_retries=0)


@pytest.fixture(scope="module")
def direct(upstream):
    return openai.OpenAI(base_url=upstream.v1, api_key="none", max_retries=0)


def test_chat_passes_through(client, direct):
    ask = dict(messages=MESSAGES, max_tokens=6, temperature=0, extra_body={"cache": False})
    got = client.chat.completions.create(model="remote", **ask)
    want = direct.chat.completions.create(model="tiny", **ask)
    assert got.model == "remote" and got.id.startswith("chatcmpl-")
    assert got.choices[0].message.content == want.choices[0].message.content
    assert got.choices[0].finish_reason == want.choices[0].finish_reason == "length"
    assert (got.usage.prompt_tokens, got.usage.completion_tokens) == (want.usage.prompt_tokens, 6)


def test_chat_stream_passes_through(client, direct):
    ask = dict(messages=MESSAGES, max_tokens=6, temperature=0, stream=True, stream_options={"include_usage": True},
               extra_body={"cache": False})
    chunks = list(client.chat.completions.create(model="remote", **ask))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    want = direct.chat.completions.create(model="tiny", **{**ask, "stream": False, "stream_options": None})
    assert text == want.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].usage.completion_tokens == 6 and chunks[-1].usage.prompt_tokens == want.usage.prompt_tokens


@pytest.mark.parametrize("stream", [False, True])
def test_completions_pass_through(client, direct, stream):
    ask = dict(prompt="Once upon a time", max_tokens=5, temperature=0, extra_body={"cache": False})
    want = direct.completions.create(model="tiny", **ask)
    if stream:
        text = "".join(c.choices[0].text for c in client.completions.create(model="remote", stream=True, **ask)
                       if c.choices)
    else:
        got = client.completions.create(model="remote", **ask)
        text = got.choices[0].text
        assert got.usage.prompt_tokens == want.usage.prompt_tokens and got.usage.completion_tokens == 5
    assert text == want.choices[0].text


def test_n_choices_and_usage_sum(client):
    got = client.chat.completions.create(model="remote", messages=MESSAGES, max_tokens=3, n=2, seed=1)
    assert sorted(c.index for c in got.choices) == [0, 1]
    assert got.usage.completion_tokens == 6


def test_counting_with_tiktoken_when_no_tokenizer_is_named(client):
    got = client.chat.completions.create(model="remote-counted", messages=MESSAGES, max_tokens=4, temperature=0)
    assert got.usage.completion_tokens == 4 and got.usage.prompt_tokens > 0   # the upstream's usage


def test_langchain_chat_openai(front):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(base_url=front.v1, api_key=KEY, model="remote", max_tokens=4, temperature=0, max_retries=0)
    message = llm.invoke("Hello")
    assert isinstance(message.content, str) and message.usage_metadata["output_tokens"] == 4
    streamed = "".join(chunk.content for chunk in llm.stream("Hello"))
    assert streamed == message.content


def test_unsendable_parameters_are_400_naming_them(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="remote", messages=MESSAGES, max_tokens=3, extra_body={"top_k": 5})
    assert e.value.body["param"] == "top_k" and "extra_params" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="remote", messages=MESSAGES, max_tokens=3, logprobs=True)
    assert e.value.body["param"] == "logprobs"


def test_extra_params_are_forwarded_when_allowed(client):
    got = client.chat.completions.create(model="remote-extra", messages=MESSAGES, max_tokens=12, temperature=0,
                                         extra_body={"ignore_eos": True, "top_k": 3, "cache": False})
    assert got.usage.completion_tokens == 12 and got.choices[0].finish_reason == "length"


def test_upstream_400_is_a_400_here(client):
    # legacy completions: the chat-like faces read max_tokens as a ceiling (cut to the context's room, here and
    # at the upstream Conch), completions refuses it, as OpenAI's
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="remote", prompt="Hi", max_tokens=10**6)
    assert "upstream refused" in e.value.body["message"] and "context length" in e.value.body["message"]


def test_grammar_needs_supports_tools(client):
    for ask, param in ((dict(response_format={"type": "json_object"}), "response_format"),
                       (dict(tools=TOOLS, tool_choice="required"), "tool_choice")):
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="remote", messages=MESSAGES, max_tokens=3, **ask)
        assert e.value.body["param"] == param and "supports_tools" in e.value.body["message"]


def test_tools_are_forwarded_and_calls_come_back(client):
    """The upstream (a Conch) enforces tool_choice with its grammar even on random weights; its calls reach
    the client as tool calls, whole and streamed."""
    ask = dict(model="remote-tools", messages=[{"role": "user", "content": "Weather in Paris?"}], tools=TOOLS,
               tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=40, temperature=0)
    got = client.chat.completions.create(**ask)
    (call,) = got.choices[0].message.tool_calls
    assert call.function.name == "get_weather" and got.choices[0].finish_reason == "stop"   # named: as OpenAI
    assert json.loads(call.function.arguments)["city"] in ("Paris", "Rome")
    names = [t.function.name for c in client.chat.completions.create(stream=True, **ask) if c.choices
             for t in c.choices[0].delta.tool_calls or () if t.function and t.function.name]
    assert names == ["get_weather"]


def test_response_format_is_forwarded(client):
    got = client.chat.completions.create(model="remote-tools", messages=MESSAGES, max_tokens=30, temperature=0,
                                         response_format={"type": "json_object"})
    if got.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(got.choices[0].message.content), dict)
    else:                                   # cut by max_tokens: still JSON so far (opens an object)
        assert got.choices[0].message.content.lstrip().startswith("{")


def test_keys_apply_in_front(front):
    r = httpx.post(f"{front.v1}/chat/completions", json={"model": "remote", "messages": MESSAGES, "max_tokens": 2})
    assert r.status_code == 401
    r = httpx.post(f"{front.v1}/chat/completions", headers={"Authorization": "Bearer sk-other"},
                   json={"model": "remote", "messages": MESSAGES, "max_tokens": 2})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_rate_limits_apply_in_front(front, upstream):
    before = metric(upstream.url, "nv_inference_request_success", model="tiny")
    codes = [httpx.post(f"{front.v1}/chat/completions", headers={"Authorization": "Bearer sk-twice"},
                        json={"model": "remote", "messages": MESSAGES, "max_tokens": 2, "cache": False},
                        timeout=60).status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    assert metric(upstream.url, "nv_inference_request_success", model="tiny") - before == 2   # refused in front


def test_cache_in_front_answers_without_the_upstream(client, front, upstream):
    ask = dict(model="remote", messages=[{"role": "user", "content": "cache me"}], max_tokens=4, temperature=0)
    first = client.chat.completions.create(**ask)
    hits = metric(front.url, "nv_cache_num_hits_per_model", METRICS_KEY, model="remote")
    for _ in range(50):                                 # the store is written in the background: until a hit
        client.chat.completions.create(**ask)
        if metric(front.url, "nv_cache_num_hits_per_model", METRICS_KEY, model="remote") > hits:
            break
        time.sleep(0.1)
    hits = metric(front.url, "nv_cache_num_hits_per_model", METRICS_KEY, model="remote")
    before = metric(upstream.url, "nv_inference_request_success", model="tiny")
    again = client.chat.completions.create(**ask)
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(stream=True, **ask)
                       if c.choices)
    assert again.choices[0].message.content == streamed == first.choices[0].message.content
    assert metric(front.url, "nv_cache_num_hits_per_model", METRICS_KEY, model="remote") == hits + 2
    assert metric(upstream.url, "nv_inference_request_success", model="tiny") == before   # never asked


def test_client_gone_closes_the_upstream_stream(front, upstream):
    cancelled = metric(upstream.url, "conch_request_cancelled", model="tiny")
    with httpx.stream("POST", f"{front.v1}/chat/completions", headers={"Authorization": f"Bearer {KEY}"},
                      json={"model": "remote-extra", "messages": MESSAGES, "max_tokens": 1500, "ignore_eos": True,
                            "stream": True, "cache": False}, timeout=60) as r:
        for line in r.iter_lines():
            if '"content":"' in line and '"content":""' not in line:
                break                                   # one real chunk, then hang up
    deadline = time.monotonic() + 60
    while metric(upstream.url, "conch_request_cancelled", model="tiny") == cancelled and time.monotonic() < deadline:
        time.sleep(0.2)
    assert metric(upstream.url, "conch_request_cancelled", model="tiny") == cancelled + 1


def test_v2_generate_through_an_upstream(front, direct):
    r = httpx.post(f"{front.url}/v2/models/remote/generate", headers={"Authorization": f"Bearer {KEY}"}, timeout=60,
                   json={"text_input": "Once upon a time", "parameters": {"max_tokens": 5, "temperature": 0}})
    assert r.status_code == 200, r.text
    want = direct.completions.create(model="tiny", prompt="Once upon a time", max_tokens=5, temperature=0)
    assert r.json()["text_output"].endswith(want.choices[0].text)
