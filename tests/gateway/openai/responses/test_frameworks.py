"""Agent frameworks on their Responses defaults, pointed at Conch: the OpenAI Agents SDK (its default model
class is the Responses one; a script in a process of its own, tests/agents_sdk.py) and LangChain's
ChatOpenAI(use_responses_api=True)."""
from __future__ import annotations

import openai
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from conch.engine.weights import DEFAULT_MODEL_ID as MODEL
from tests.agents_sdk import run_agents_sdk

_AGENT_SCRIPT = """
import asyncio, sys
from openai import AsyncOpenAI
from pydantic import BaseModel
from agents import (Agent, ModelSettings, Runner, function_tool, set_default_openai_api,
                    set_default_openai_client, set_tracing_disabled)
from agents.models.openai_responses import OpenAIResponsesModel

set_default_openai_client(AsyncOpenAI(base_url=sys.argv[1], api_key="none", max_retries=0))
set_default_openai_api("responses")
set_tracing_disabled(True)
calls = []

@function_tool
def get_weather(city: str) -> str:
    \"\"\"The weather in a city.\"\"\"
    calls.append(city)
    return "sunny"

class Answer(BaseModel):
    city: str
    weather: str

agent = Agent(name="weather", instructions="Use get_weather, then answer.", model=sys.argv[2], tools=[get_weather],
              output_type=Answer, model_settings=ModelSettings(tool_choice="required", parallel_tool_calls=False,
                                                               max_tokens=40, temperature=0))
assert isinstance(agent.model, str)        # the default model class is chosen by the SDK: Responses

async def main():
    result = await Runner.run(agent, "What is the weather in Paris?", max_turns=4)
    assert isinstance(result.final_output, Answer), result.final_output
    assert calls, "the tool was never called"
    streamed = Runner.run_streamed(agent, "What is the weather in Rome?", max_turns=4)
    kinds = [event.type async for event in streamed.stream_events()]
    assert "raw_response_event" in kinds and isinstance(streamed.final_output, Answer)
    assert len(calls) == 2
    print("agents ok", type(result.raw_responses[0]).__name__)

asyncio.run(main())
"""


def test_agents_sdk_default_model(smollm2_server, tmp_path):
    out = run_agents_sdk(_AGENT_SCRIPT, [smollm2_server.v1, MODEL], tmp_path, timeout=900)
    assert "agents ok" in out


def _chat(server, **kwargs) -> ChatOpenAI:
    return ChatOpenAI(model=MODEL, base_url=server.v1, api_key="none", use_responses_api=True, temperature=0,
                      max_retries=0, **kwargs)


def test_langchain_invoke_and_stream(smollm2_server):
    llm = _chat(smollm2_server, max_tokens=6)
    reply = llm.invoke("Say hi")
    assert reply.text and reply.response_metadata["id"].startswith("resp_")
    chunks = list(llm.stream("Say hi"))
    assert "".join(c.text for c in chunks) == reply.text          # temperature 0: the same text


def test_langchain_tools_round_trip(smollm2_server):
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    llm = _chat(smollm2_server, max_tokens=40).bind_tools([get_weather], tool_choice="get_weather",
                                                           parallel_tool_calls=False)
    question = HumanMessage("What is the weather in Paris?")
    call = llm.invoke([question])
    assert [c["name"] for c in call.tool_calls] == ["get_weather"] and not call.text
    answer = _chat(smollm2_server, max_tokens=8).bind_tools([get_weather]).invoke(
        [question, call, ToolMessage("sunny", tool_call_id=call.tool_calls[0]["id"])])
    assert answer.text


def test_langchain_structured_output(smollm2_server):
    class Person(BaseModel):
        name: str
        age: int

    person = _chat(smollm2_server, max_tokens=30).with_structured_output(Person).invoke("Invent a person")
    assert isinstance(person, Person)


def test_langchain_previous_response_id(smollm2_server):
    llm = _chat(smollm2_server, max_tokens=6, use_previous_response_id=True)
    first = llm.invoke("Name a color")
    second = llm.invoke([HumanMessage("Name a color"), first, HumanMessage("Another one")])
    stored = openai.OpenAI(base_url=smollm2_server.v1, api_key="none").responses.retrieve(
        second.response_metadata["id"])
    assert stored.previous_response_id == first.response_metadata["id"] and second.text
    assert stored.usage.input_tokens > first.usage_metadata["input_tokens"]      # the stored head was prompted
