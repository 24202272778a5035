"""POST /v1/responses through a real server with the openai SDK: whole, streamed (the SDK's stream helper),
parsed, function and custom tools, stored responses, chains, background runs, and bad input. Every response
object and event is validated against the openai package's types (checks.py)."""
from __future__ import annotations

import re
import time

import httpx
import openai
import pytest
from pydantic import BaseModel

from conch.engine.weights import DEFAULT_MODEL_ID as MODEL
from tests.gateway.openai.responses.checks import comparable, post, stream_events, valid_response

WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
NAMED = {"type": "function", "name": "get_weather"}
SUM_GRAMMAR = 'start: NUM "+" NUM\nNUM: /[0-9]{1,3}/'
# Long enough (> 256 tokens) for the prefix cache to keep the prompt's head for the next turn.
INSTRUCTIONS = "You are a terse assistant. " + " ".join(f"Rule {i}: answer in one short sentence." for i in range(40))


def test_create_whole(client):
    raw = client.responses.with_raw_response.create(model=MODEL, input="Say hi", max_output_tokens=4,
                                                    temperature=0)
    body = raw.http_response.json()
    valid_response(body)
    response = raw.parse()
    assert response.id.startswith("resp_") and response.object == "response"
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    assert response.output[0].type == "message" and response.output[0].content[0].annotations == []
    assert response.output_text and response.usage.output_tokens == 4
    assert body["usage"]["output_tokens_details"] == {"reasoning_tokens": 0}
    assert body["max_output_tokens"] == 4 and body["temperature"] == 0 and body["store"] is True


def test_stream_helper_and_whole_agree(client, smollm2_server):
    """The SDK's stream helper accepts the sequence; the final streamed response equals the whole one."""
    request = {"model": MODEL, "input": "Reply with the single word yes", "max_output_tokens": 24,
               "temperature": 0}
    with client.responses.stream(**request) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    assert types[-1] == "response.completed" and "response.output_text.delta" in types
    whole = post(smollm2_server.url, request)
    assert final.output_text == whole["output"][0]["content"][0]["text"] and len(whole["output"]) == 1
    events = stream_events(smollm2_server.url, request)             # raw events, each validated
    assert comparable(events[-1]["response"]["output"]) == comparable(whole["output"])


def test_parse_with_pydantic_model(client):
    class Person(BaseModel):
        name: str
        age: int

    response = client.responses.parse(model=MODEL, input="Invent a person", text_format=Person,
                                      max_output_tokens=30, temperature=0)
    assert isinstance(response.output_parsed, Person)


def test_function_call_round_trip(client, smollm2_server):
    first = client.responses.create(model=MODEL, input="What is the weather in Paris?", tools=[WEATHER],
                                    tool_choice=NAMED, parallel_tool_calls=False, max_output_tokens=40,
                                    temperature=0)
    calls = [item for item in first.output if item.type == "function_call"]
    assert [c.name for c in calls] == ["get_weather"] and calls[0].call_id
    assert not any(item.type == "message" for item in first.output)     # a call is never text
    second = client.responses.create(
        model=MODEL, previous_response_id=first.id, tools=[WEATHER], max_output_tokens=8, temperature=0,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny, 21 C"}])
    assert second.output and second.previous_response_id == first.id
    events = stream_events(smollm2_server.url, {"model": MODEL, "input": "Weather in Rome?", "tools": [WEATHER],
                                                "tool_choice": "required", "parallel_tool_calls": False,
                                                "max_output_tokens": 40, "temperature": 0})
    kinds = [e["type"] for e in events]
    assert "response.function_call_arguments.done" in kinds and "response.output_text.delta" not in kinds


def test_custom_tool_with_lark_grammar(client, smollm2_server):
    tool = {"type": "custom", "name": "calc", "description": "adds two numbers",
            "format": {"type": "grammar", "syntax": "lark", "definition": SUM_GRAMMAR}}
    request = {"model": MODEL, "input": "Add two numbers", "tools": [tool],
               "tool_choice": {"type": "custom", "name": "calc"}, "max_output_tokens": 8, "temperature": 0}
    response = client.responses.create(**request)
    (call,) = response.output
    assert call.type == "custom_tool_call" and call.name == "calc"
    assert re.fullmatch(r"[0-9]{1,3}\+[0-9]{1,3}", call.input)         # a sentence of SUM_GRAMMAR
    events = stream_events(smollm2_server.url, request)
    assert "response.custom_tool_call_input.done" in [e["type"] for e in events]


def test_retrieve_input_items_delete(client):
    response = client.responses.create(model=MODEL, input=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], max_output_tokens=2)
    assert client.responses.retrieve(response.id).output_text == response.output_text
    items = client.responses.input_items.list(response.id, order="asc")
    assert [i.role for i in items.data] == ["system", "user"]
    page = client.responses.input_items.list(response.id, order="asc", limit=1, after=items.data[0].id)
    assert [i.role for i in page.data] == ["user"]
    client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)


def test_previous_response_chain_reuses_the_prompt_head(client):
    first = client.responses.create(model=MODEL, instructions=INSTRUCTIONS, input="Name a color",
                                    max_output_tokens=4, temperature=0)
    second = client.responses.create(model=MODEL, instructions=INSTRUCTIONS, input="Another one",
                                     previous_response_id=first.id, max_output_tokens=4, temperature=0)
    assert second.usage.input_tokens > first.usage.input_tokens
    assert second.usage.input_tokens_details.cached_tokens > 0
    items = client.responses.input_items.list(second.id)
    assert [i.type for i in items.data] == ["message"]                # its own input only


def test_background_poll_and_cancel(client):
    queued = client.responses.create(model=MODEL, input="Say hi", max_output_tokens=3, background=True)
    assert queued.status in ("queued", "in_progress") and queued.background
    deadline = time.monotonic() + 300
    polled = client.responses.retrieve(queued.id)
    while polled.status in ("queued", "in_progress") and time.monotonic() < deadline:
        time.sleep(0.5)
        polled = client.responses.retrieve(queued.id)
    assert polled.status == "incomplete" and polled.output_text
    long = client.responses.create(model=MODEL, input="Write a long story", max_output_tokens=400, background=True)
    cancelled = client.responses.cancel(long.id)
    assert cancelled.status == "cancelled"
    assert client.responses.retrieve(long.id).status == "cancelled"


@pytest.mark.parametrize("body, status, param", [
    ({"input": [{"type": "no_such_item"}]}, 400, "input.0.type"),
    ({"input": [{"type": "function_call_output", "call_id": "call_x", "output": "1"}]}, 400, "input.0.call_id"),
    ({"input": "hi", "tools": [{"type": "web_searching"}]}, 400, "tools.0.type"),
    ({"input": "hi", "tools": [{"type": "mcp", "server_label": "x"}]}, 400, "tools.0.server_label"),   # unregistered
    ({"input": "hi", "previous_response_id": "resp_nope"}, 400, "previous_response_id"),   # ..._not_found
    ({"input": "hi", "frobnicate": 1}, 400, "frobnicate"),
    ({"input": "hi", "truncation": "auto"}, 400, "truncation"),
    ({"input": "hi", "max_output_tokens": -1}, 400, "max_output_tokens"),
])
def test_bad_input_names_the_field(smollm2_server, body, status, param):
    with httpx.Client(base_url=smollm2_server.v1, timeout=600) as http:
        reply = http.post("/responses", json={"model": MODEL, **body})
        assert reply.status_code == status, reply.text
        assert reply.json()["error"]["param"] == param
        again = http.post("/responses", json={"model": MODEL, "input": "hi", "max_output_tokens": 1})
        assert again.status_code == 200                                # the connection is still usable


def test_conversation_is_the_head_and_gets_the_turn(client):
    conversation = client.conversations.create(items=[{"role": "user", "content": "My name is Ada."}])
    response = client.responses.create(model=MODEL, conversation=conversation.id, input="What is my name?",
                                       max_output_tokens=4, temperature=0)
    assert response.conversation.id == conversation.id
    items = client.conversations.items.list(conversation.id, order="asc").data
    assert [i.type for i in items] == ["message", "message", "message"]
    assert items[-1].id == response.output[0].id and items[1].content[0].text == "What is my name?"
    assert response.usage.input_tokens > client.responses.create(
        model=MODEL, input="What is my name?", max_output_tokens=1).usage.input_tokens   # the head was prompted
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model=MODEL, conversation="conv_nope", input="hi", max_output_tokens=1)


def test_logprobs_and_settings_echo(smollm2_server):
    request = {"model": MODEL, "input": "Say hi", "max_output_tokens": 3, "temperature": 0, "top_logprobs": 2,
               "include": ["message.output_text.logprobs"], "metadata": {"k": "v"}, "user": "u1",
               "max_tool_calls": 2, "service_tier": "auto", "truncation": "disabled"}
    whole = post(smollm2_server.url, request)
    part = whole["output"][0]["content"][0]
    assert len(part["logprobs"]) == 3 and all(len(p["top_logprobs"]) == 2 for p in part["logprobs"])
    assert whole["metadata"] == {"k": "v"} and whole["user"] == "u1" and whole["max_tool_calls"] == 2
    events = stream_events(smollm2_server.url, request)
    deltas = [p for e in events if e["type"] == "response.output_text.delta" for p in e["logprobs"]]
    done = next(e for e in events if e["type"] == "response.output_text.done")
    assert deltas == done["logprobs"] == part["logprobs"]
