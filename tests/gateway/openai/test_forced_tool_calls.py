"""Forced tool choices (required, named) with SmolLM2: a call cut by max_tokens stays a call, the tool format's
markup never reaches content, a required answer holds at most max_parallel_tool_calls calls, and a named
choice ends "stop" (as OpenAI and vLLM), "tool_calls" only where the model chose to call."""
from __future__ import annotations

import openai
import pytest

from conch.engine.weights import DEFAULT_MODEL_ID
from tests.conftest import start_server, write_repository
from tests.gateway.openai.tool_answers import ask

MODEL = DEFAULT_MODEL_ID
TWO_CALLS = "smollm2-two-calls"
CITY = {"type": "function", "function": {  # as LangChain's with_structured_output sends it: no additionalProperties
    "name": "City", "description": "A city",
    "parameters": {"type": "object", "properties": {"name": {"type": "string"}, "country": {"type": "string"}},
                   "required": ["name", "country"]}}}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}},
                   "required": ["city"], "additionalProperties": False}}}
NAMED = {"type": "function", "function": {"name": "City"}}
MARKUP = ("<tool_call>", "</tool_call>", '{"name"')


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    base = {"weights": "builtin:smollm2", "dtype": "float32", "max_batch_size": 4}
    write_repository(root, {MODEL: base, TWO_CALLS: {**base, "max_parallel_tool_calls": 2}})
    s = start_server(["--model-repository", str(root)], root)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0, timeout=300)


def _ask(client, stream: bool, **kwargs):
    """(finish_reason, content, [(name, arguments)]) of one choice, whole or reassembled from the stream."""
    finish, content, calls = ask(client, stream, **{"model": MODEL, "temperature": 0, **kwargs})
    return finish, content, [(name, arguments) for _, name, arguments in calls]


@pytest.mark.parametrize("stream", [False, True])
def test_named_call_cut_by_max_tokens_is_a_call_with_finish_length(client, stream):
    # The whole call takes 34 tokens; 20 cut it inside the first argument's value.
    finish, content, calls = _ask(client, stream, messages=[{"role": "user", "content": "Name a city in Italy."}],
                                  tools=[CITY], tool_choice=NAMED, max_tokens=20)
    assert finish == "length"
    assert content is None
    assert len(calls) == 1 and calls[0][0] == "City"
    assert calls[0][1].startswith('{"name":"') and not calls[0][1].endswith("}")


@pytest.mark.parametrize("max_tokens", [3, 8, 15, 28, 45])
@pytest.mark.parametrize("choice", ["required", NAMED], ids=["required", "named"])
def test_forced_choice_never_leaks_markup_into_content(client, choice, max_tokens):
    for stream in (False, True):
        finish, content, calls = _ask(client, stream, messages=[{"role": "user", "content": "Name two cities."}],
                                      tools=[CITY, WEATHER], tool_choice=choice, max_tokens=max_tokens)
        assert content is None, (stream, content)
        assert not any(m in name for name, _ in calls for m in MARKUP)
        assert finish in ("length", "stop", "tool_calls")


def test_named_choice_that_completes_finishes_stop(client):
    finish, content, calls = _ask(client, False, messages=[{"role": "user", "content": "Name a city in Italy."}],
                                  tools=[CITY], tool_choice=NAMED, max_tokens=120)
    assert finish == "stop" and content is None and [n for n, _ in calls] == ["City"]


def test_required_choice_that_completes_finishes_tool_calls(client):
    finish, _, calls = _ask(client, False, messages=[{"role": "user", "content": "What's the weather in Paris?"}],
                            tools=[WEATHER], tool_choice="required", max_tokens=200)
    assert finish == "tool_calls" and calls and all(n == "get_weather" for n, _ in calls)


@pytest.mark.parametrize("model,bound", [(MODEL, 4), (TWO_CALLS, 2)])
def test_required_answer_holds_at_most_max_parallel_tool_calls(client, model, bound):
    # SmolLM2 would go on calling for every city (and repeat them) until max_tokens; the grammar ends it.
    question = "What's the weather in Paris, Rome, Oslo, Tokyo, Lima, Cairo and Berlin?"
    finish, _, calls = _ask(client, False, model=model, messages=[{"role": "user", "content": question}],
                            tools=[WEATHER], tool_choice="required", max_tokens=400)
    assert finish == "tool_calls"
    assert len(calls) == bound

