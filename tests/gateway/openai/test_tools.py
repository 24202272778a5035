"""Tool calling end to end with SmolLM2: the openai SDK and LangChain as clients."""
from __future__ import annotations

import json

import httpx
import openai
import pytest

from conch.engine.weights import DEFAULT_MODEL_ID

MODEL = DEFAULT_MODEL_ID
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}},
                   "required": ["city"], "additionalProperties": False}}}
ADD = {"type": "function", "function": {
    "name": "add", "description": "Add two integers",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The current time in a timezone",
    "parameters": {"type": "object", "properties": {"timezone": {"type": "string", "maxLength": 30}},
                   "required": ["timezone"], "additionalProperties": False}}}
TOOLS = [WEATHER, ADD, TIME]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@pytest.fixture(scope="module")
def client(smollm2_server):
    return openai.OpenAI(base_url=smollm2_server.v1, api_key="none", max_retries=0, timeout=300)


def _valid(call) -> dict:
    import jsonschema

    args = json.loads(call.function.arguments)
    jsonschema.validate(args, SCHEMAS[call.function.name])
    assert call.id.startswith("call_") and len(call.id) >= 14 and call.type == "function"
    return args


def _ask(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize("stream", [False, True])
def test_named_choice_always_gives_that_call(client, stream):
    kwargs = dict(model=MODEL, messages=_ask("What is 2 plus 3?"), tools=TOOLS, max_tokens=60, temperature=0,
                  tool_choice={"type": "function", "function": {"name": "add"}})
    if not stream:
        r = client.chat.completions.create(**kwargs)
        assert r.choices[0].finish_reason == "stop"  # a named choice is the caller's decision (OpenAI, vLLM)
        calls = r.choices[0].message.tool_calls
    else:
        with client.beta.chat.completions.stream(**kwargs) as s:
            final = s.get_final_completion()
        calls = final.choices[0].message.tool_calls
        assert final.choices[0].finish_reason == "stop"
    assert len(calls) == 1 and calls[0].function.name == "add"
    _valid(calls[0])


def test_required_picks_any_listed_tool_across_prompts(client):
    prompts = ["What's the weather in Paris?", "Add 4 and 9.", "What time is it in Tokyo?"]
    names = set()
    for prompt in prompts:
        r = client.chat.completions.create(model=MODEL, messages=_ask(prompt), tools=TOOLS, tool_choice="required",
                                           max_tokens=80, temperature=0)
        calls = r.choices[0].message.tool_calls
        assert calls and r.choices[0].finish_reason == "tool_calls"
        for call in calls:
            _valid(call)
            names.add(call.function.name)
    assert len(names) >= 2, names


def test_required_stream_reassembles_to_the_same_calls(client):
    kwargs = dict(model=MODEL, messages=_ask("What's the weather in Rome?"), tools=TOOLS, tool_choice="required",
                  max_tokens=80, temperature=0)
    whole = client.chat.completions.create(**kwargs).choices[0].message.tool_calls
    chunks = list(client.chat.completions.create(stream=True, **kwargs))
    seen: dict[int, dict] = {}
    for chunk in chunks:
        for part in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            if part.index not in seen:
                assert part.id and part.function.name and part.type == "function"
                seen[part.index] = {"name": part.function.name, "arguments": part.function.arguments or ""}
            else:
                assert part.id is None and part.function.name is None
                seen[part.index]["arguments"] += part.function.arguments or ""
    streamed = [(v["name"], v["arguments"]) for v in seen.values()]
    assert [(c.function.name, c.function.arguments) for c in whole] == streamed


def test_parallel_tool_calls_false_allows_one_call(client):
    r = client.chat.completions.create(model=MODEL, messages=_ask("Weather in Paris and in Rome?"), tools=TOOLS,
                                       tool_choice="required", parallel_tool_calls=False, max_tokens=80, temperature=0)
    assert len(r.choices[0].message.tool_calls) == 1


def test_none_gives_text(client):
    r = client.chat.completions.create(model=MODEL, messages=_ask("Say hello."), tools=TOOLS, tool_choice="none",
                                       max_tokens=12, temperature=0)
    assert r.choices[0].message.tool_calls is None and r.choices[0].message.content
    assert r.choices[0].finish_reason in ("stop", "length")


def test_tool_result_round_trip_ends_in_text(client):
    from conch.agents.loop import Agent

    agent = Agent(client, MODEL, first_tool_choice="required", tool_choice_after_results="none",
                  max_tokens=60, temperature=0)

    @agent.tool
    def get_weather(city: str) -> str:
        """Current weather in a city"""
        return f"sunny and 21 C in {city}"

    result = agent.run("What's the weather in Paris?")
    assert result.calls and result.calls[0][0] == "get_weather"
    assert result.answer and result.steps == 2


def test_langchain_bind_tools_round_trip(smollm2_server):
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(base_url=smollm2_server.v1, api_key="none", model=MODEL, temperature=0, max_tokens=60)
    bound = llm.bind_tools([WEATHER], tool_choice="get_weather")
    question = HumanMessage("What's the weather in Oslo?")
    ai = bound.invoke([question])
    assert ai.tool_calls and ai.tool_calls[0]["name"] == "get_weather" and "city" in ai.tool_calls[0]["args"]
    chunks = list(bound.stream([question]))
    merged = chunks[0]
    for c in chunks[1:]:
        merged = merged + c
    assert merged.tool_calls[0]["name"] == "get_weather" and merged.tool_calls[0]["args"] == ai.tool_calls[0]["args"]
    answer = llm.invoke([question, ai, ToolMessage("sunny, 18 C", tool_call_id=ai.tool_calls[0]["id"])])
    assert isinstance(answer.content, str) and answer.content


def test_langchain_structured_output_with_function_calling(smollm2_server):
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel

    class City(BaseModel):
        name: str
        country: str

    llm = ChatOpenAI(base_url=smollm2_server.v1, api_key="none", model=MODEL, temperature=0, max_tokens=60)
    city = llm.with_structured_output(City, method="function_calling").invoke("Name a city in Italy.")
    assert isinstance(city, City) and city.name


@pytest.mark.parametrize("patch,param", [
    ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tools": None, "tool_choice": "required"}, "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "wrong"}}}]},
     "tools.0.function.parameters"),
    ({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "call_missing", "content": "1"}]},
     "messages.1.tool_call_id"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
])
def test_bad_tool_input_is_400(smollm2_server, patch, param):
    body = {"model": MODEL, "messages": _ask("x"), "tools": TOOLS, **patch}
    body = {k: v for k, v in body.items() if v is not None}
    r = httpx.post(f"{smollm2_server.v1}/chat/completions", json=body, timeout=60)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param, r.json()


@pytest.mark.parametrize("example", ["weather_agent.py", "langchain_tools.py"])
def test_examples_run_against_a_server(smollm2_server, example):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parents[3] / "examples" / example
    out = subprocess.run([sys.executable, str(script), "--base-url", smollm2_server.v1], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "answer:" in out.stdout
