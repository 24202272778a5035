"""Reasoning on every face, over loopback with the real clients, against builtin:tiny-think (random weights in a
Qwen3-shaped chat template whose `<think>`/`</think>` are single tokens and whose generation prompt opens the
thinking).

Random weights never close their thinking, so the shape is forced through the real engine path: the thinking
budget makes the engine force `</think>` after BUDGET tokens of noise (sampled, so it is not all whitespace),
and a forced tool choice (or an output schema) is a grammar that must start at the answer, not at the first
token. Each face shows the reasoning apart from the answer and the call intact after it."""
from __future__ import annotations

import json

import anthropic
import openai
import pytest
from tests.conftest import start_server, write_repository

MODEL = "think"
BUDGET = 4
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris"]}},
                   "required": ["city"]}}}]
ASK = "What is the weather in Paris?"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    write_repository(root, {MODEL: {"weights": "builtin:tiny-think", "dtype": "float32", "max_batch_size": 4}})
    server = start_server(["--model-repository", str(root), "--model-alias", f"claude-*={MODEL}"], root)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def oai(server):
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def claude(server):
    with anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0) as client:
        yield client


# -- chat completions ------------------------------------------------------------------------------------

def chat_body(**extra):
    return dict(model=MODEL, messages=[{"role": "user", "content": ASK}], tools=TOOLS, tool_choice="required",
                parallel_tool_calls=False, max_tokens=40, seed=7,
                extra_body={"thinking_token_budget": BUDGET, **extra})


def test_chat_reasoning_content_then_the_forced_call(oai):
    response = oai.chat.completions.create(**chat_body())
    message = response.choices[0].message
    assert message.reasoning_content.strip()                   # the SDK keeps the extra field
    assert [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == \
        [("get_weather", {"city": "Paris"})]
    assert response.choices[0].finish_reason == "tool_calls"
    assert response.usage.completion_tokens_details.reasoning_tokens == BUDGET + 2   # the forced "</think>\n\n"


def test_chat_streams_reasoning_as_its_own_deltas(oai):
    reasoning, content, calls = "", "", {}
    for chunk in oai.chat.completions.create(**chat_body(), stream=True):
        for choice in chunk.choices:
            delta = choice.delta
            reasoning += getattr(delta, "reasoning_content", None) or ""
            content += delta.content or ""
            for call in delta.tool_calls or ():
                calls.setdefault(call.index, [call.function.name, ""])[1] += call.function.arguments or ""
    assert reasoning.strip() and "</think>" not in reasoning and content == ""
    assert [(name, json.loads(args)) for name, args in calls.values()] == [("get_weather", {"city": "Paris"})]


def test_chat_effort_none_turns_thinking_off(oai):
    response = oai.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": ASK}], max_tokens=8,
        temperature=0, reasoning_effort="none",
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": {"enum": ["yes"]}}})
    message = response.choices[0].message
    # the template wrote the empty thinking block: the answer is read from the first token, under the schema
    assert getattr(message, "reasoning_content", None) is None and message.content == '"yes"'


# -- Responses --------------------------------------------------------------------------------------------

def responses_body(**extra):
    return dict(model=MODEL, input=ASK, tools=[{"type": "function", **TOOLS[0]["function"]}],
                tool_choice="required", parallel_tool_calls=False, max_output_tokens=40, store=False,
                reasoning={"effort": "low", "summary": "auto"}, include=["reasoning.encrypted_content"],
                extra_body=extra or None)


def test_responses_reasoning_item_streamed_then_read_back(oai, server):
    events = list(oai.responses.create(**responses_body(), stream=True))
    kinds = [e.type for e in events]
    assert "response.reasoning_summary_text.delta" in kinds and "response.reasoning_text.delta" in kinds
    final = events[-1].response
    reasoning, call = final.output
    assert reasoning.type == "reasoning" and reasoning.summary[0].text == reasoning.content[0].text
    assert reasoning.encrypted_content and call.type == "function_call" and json.loads(call.arguments) == \
        {"city": "Paris"}
    assert final.usage.output_tokens_details.reasoning_tokens == 40 // 4 + 2     # effort low: a quarter
    # the next stateless turn sends the items back: the sealed reasoning opens, a changed blob is refused
    later = [*[item.model_dump(exclude_none=True) for item in final.output],
             {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]
    answer = oai.responses.create(model=MODEL, input=later, max_output_tokens=4, store=False,
                                  reasoning={"effort": "none"})
    assert answer.status in ("completed", "incomplete")


# -- Messages ---------------------------------------------------------------------------------------------

def messages_body(**thinking):
    return dict(model="claude-test", max_tokens=40,
                messages=[{"role": "user", "content": ASK}],
                tools=[{"name": "get_weather", "description": "The weather in a city",
                        "input_schema": TOOLS[0]["function"]["parameters"]}],
                tool_choice={"type": "any", "disable_parallel_tool_use": True},
                thinking={"type": "enabled", "budget_tokens": BUDGET, **thinking})


def test_messages_thinking_block_then_tool_use(claude):
    message = claude.messages.create(**messages_body())
    thinking, use = message.content
    assert thinking.type == "thinking" and thinking.thinking.strip() and thinking.signature
    assert message.usage.model_dump()["output_tokens_details"] == {"thinking_tokens": BUDGET + 2}
    assert use.type == "tool_use" and use.input == {"city": "Paris"} and message.stop_reason == "tool_use"
    # sent back with its signature, the thinking is rendered into the next prompt (count_tokens sees it)
    turn = [{"role": "user", "content": ASK},
            {"role": "assistant", "content": [thinking.model_dump(), use.model_dump()]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]}]
    forged = [turn[0], {"role": "assistant", "content": [{**thinking.model_dump(), "signature": "forged"},
                                                         use.model_dump()]}, turn[2]]
    kept = claude.messages.count_tokens(model="claude-test", messages=turn).input_tokens
    dropped = claude.messages.count_tokens(model="claude-test", messages=forged).input_tokens
    assert kept > dropped


def test_messages_stream_thinking_delta_and_signature(claude):
    with claude.messages.stream(**messages_body()) as stream:
        deltas = [e.delta.type for e in stream if e.type == "content_block_delta"]
        message = stream.get_final_message()
    assert deltas[0] == "thinking_delta" and "signature_delta" in deltas
    assert message.content[0].type == "thinking" and message.content[0].thinking.strip()
    assert message.content[1].type == "tool_use" and message.content[1].input == {"city": "Paris"}


@pytest.mark.parametrize("display", ["omitted", "updates"])   # "updates": Claude Code 2.1.332's first try
def test_messages_display_omitted_is_redacted(claude, display):
    with claude.messages.stream(**messages_body(display=display)) as stream:
        message = stream.get_final_message()
    redacted, use = message.content
    assert redacted.type == "redacted_thinking" and redacted.data
    assert use.type == "tool_use"


def test_messages_thinking_disabled_and_bad_budget(claude):
    body = messages_body()
    body["thinking"] = {"type": "disabled"}
    message = claude.messages.create(**body)
    assert [b.type for b in message.content] == ["tool_use"]
    body["thinking"] = {"type": "enabled", "budget_tokens": 40}
    with pytest.raises(anthropic.BadRequestError, match="budget_tokens"):
        claude.messages.create(**body)
