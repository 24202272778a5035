"""/v1/messages through the anthropic SDK (its own types validate what the server sends), and bad input read
as Anthropic's error shape, by the SDK as its own exception classes and by one httpx client that stays usable.

Greedy decoding (temperature 0: the SDK's current signature no longer names it, so it travels in extra_body)
and a few tokens per request: the model is SmolLM2-135M on a shared CPU."""
from __future__ import annotations

import json

import anthropic
import httpx
import pytest
from anthropic.types import Message

from tests.gateway.anthropic.conftest import KEY, MODEL

GREEDY = {"temperature": 0}
WEATHER = {"name": "get_weather", "description": "The weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def test_create_answers_a_message_billed_as_count_tokens_counts(client):
    body = {"model": "claude-sonnet-4-5", "max_tokens": 6, "system": "Answer briefly.",
            "messages": [{"role": "user", "content": "Name a colour."}]}
    raw = client.messages.with_raw_response.create(**body, extra_body=GREEDY)
    message = Message.model_validate(raw.http_response.json())          # the package's own type, strictly
    assert raw.http_response.headers["request-id"].startswith("req_")
    assert message.id.startswith("msg_") and message.model == "claude-sonnet-4-5" and message.role == "assistant"
    assert message.content and message.content[0].type == "text" and message.content[0].text
    assert message.stop_reason in ("end_turn", "max_tokens") and message.usage.output_tokens <= 6
    counted = client.messages.count_tokens(model=body["model"], system=body["system"], messages=body["messages"])
    usage = message.usage
    assert counted.input_tokens == usage.input_tokens + usage.cache_read_input_tokens + \
        usage.cache_creation_input_tokens
    assert usage.cache_creation_input_tokens == 0 and counted.input_tokens > 10


def test_stream_helper_accumulates_text(client):
    with client.messages.stream(model=MODEL, max_tokens=6, messages=[{"role": "user", "content": "Say hello."}],
                                extra_body=GREEDY) as stream:
        texts = [event.text for event in stream if event.type == "text"]
        final = stream.get_final_message()
    assert texts and final.content[0].type == "text" and final.content[0].text == "".join(texts)
    assert final.stop_reason in ("end_turn", "max_tokens") and final.usage.output_tokens >= len(texts)
    assert final.usage.input_tokens + final.usage.cache_read_input_tokens > 10


def test_stream_helper_accumulates_a_forced_tool_call(client):
    with client.messages.stream(model=MODEL, max_tokens=48, tools=[WEATHER], messages=ASK, extra_body=GREEDY,
                                tool_choice={"type": "tool", "name": "get_weather",
                                             "disable_parallel_tool_use": True}) as stream:
        fragments = [e.delta.partial_json for e in stream
                     if e.type == "content_block_delta" and e.delta.type == "input_json_delta"]
        final = stream.get_final_message()
    (block,) = final.content
    assert block.type == "tool_use" and block.name == "get_weather" and block.id.startswith("toolu_")
    assert len(fragments) > 1 and json.loads("".join(fragments)) == block.input
    assert isinstance(block.input.get("city"), str) and final.stop_reason == "tool_use"


def test_tool_choice_any_then_a_tool_result_round_trip(client):
    called = client.messages.create(model=MODEL, max_tokens=48, tools=[WEATHER], messages=ASK, extra_body=GREEDY,
                                    tool_choice={"type": "any", "disable_parallel_tool_use": True})
    (use,) = [b for b in called.content if b.type == "tool_use"]
    assert called.stop_reason == "tool_use" and use.name == "get_weather" and "city" in use.input
    history = [*ASK, {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in called.content]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                             "content": [{"type": "text", "text": "Sunny, 24 C"}]}]}]
    answer = client.messages.create(model=MODEL, max_tokens=8, tools=[WEATHER], messages=history,
                                    extra_body=GREEDY)
    assert answer.content and answer.stop_reason in ("end_turn", "max_tokens", "tool_use")
    billed = answer.usage.input_tokens + answer.usage.cache_read_input_tokens
    assert billed > called.usage.input_tokens + called.usage.cache_read_input_tokens    # the call and its result


def test_errors_are_the_sdk_s_own_exception_classes(server, client):
    with pytest.raises(anthropic.NotFoundError) as missing:
        client.messages.create(model="no-such-model", max_tokens=2, messages=ASK)
    assert missing.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model=MODEL, max_tokens=2, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "url", "url": "http://example.com/a.png"}}]}])
    assert "image" in bad.value.message and bad.value.body["type"] == "error"
    stranger = anthropic.Anthropic(base_url=server.url, api_key="sk-wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as denied:
        stranger.messages.count_tokens(model=MODEL, messages=ASK)
    assert denied.value.body["error"]["type"] == "authentication_error"
    with pytest.raises(anthropic.BadRequestError, match="budget_tokens"):     # Anthropic's own rule
        client.messages.create(model=MODEL, max_tokens=2, messages=ASK,
                               thinking={"type": "enabled", "budget_tokens": 1024})


def test_thinking_on_a_model_that_does_not_reason(client):
    """SmolLM2's template writes no reasoning: thinking is accepted and the answer has no thinking block."""
    message = client.messages.create(model=MODEL, max_tokens=8, messages=ASK,
                                     thinking={"type": "enabled", "budget_tokens": 4})
    assert [b.type for b in message.content] == ["text"]
    assert message.usage.model_dump()["output_tokens_details"] == {"thinking_tokens": 0}


BAD = [  # (what is wrong, the body's changes, what the 400 names)
    ("no max_tokens", {"max_tokens": None}, "max_tokens"),
    ("a tool_result without its tool_use", {"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_nowhere", "content": "42"}]}]}, "toolu_nowhere"),
    ("an unknown block type", {"messages": [{"role": "user", "content": [{"type": "hologram", "text": "x"}]}]},
     "hologram"),
    ("a server tool", {"tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]},
     "web_search_20250305"),
    ("an unknown field", {"temperature_scale": 2}, "temperature_scale"),
]


def test_bad_input_is_a_400_in_anthropic_shape_on_a_usable_connection(server):
    good = {"model": MODEL, "max_tokens": 2, "messages": ASK, "temperature": 0}
    with httpx.Client(base_url=server.url, headers={"x-api-key": KEY, "anthropic-version": "2023-06-01",
                                                    "anthropic-beta": "prompt-caching-2024-07-31"},
                      timeout=600) as http:
        for what, changes, named in BAD:
            body = {k: v for k, v in {**good, **changes}.items() if v is not None}
            r = http.post("/v1/messages", json=body)
            assert r.status_code == 400, what
            assert r.json()["type"] == "error" and r.json()["error"]["type"] == "invalid_request_error", what
            assert named in r.json()["error"]["message"], (what, r.json())
            assert r.headers["request-id"] and r.headers.get("connection") != "close", what
        for method, path, status, kind in (("GET", "/v1/messages", 405, "invalid_request_error"),
                                           ("POST", "/v1/messages/nope", 404, "not_found_error")):
            r = http.request(method, path, json=good)
            assert (r.status_code, r.json()["error"]["type"]) == (status, kind)
        assert http.post("/v1/messages", json=good).status_code == 200       # the same client, still served
        r = http.post("/v1/messages", json=good, headers={"x-api-key": "sk-wrong"})
        assert (r.status_code, r.json()["error"]["type"]) == (401, "authentication_error")
        openai_face = http.post("/v1/chat/completions", json=good, headers={"x-api-key": "sk-wrong"})
        assert openai_face.status_code == 401 and openai_face.json()["error"]["code"] == "invalid_api_key"
