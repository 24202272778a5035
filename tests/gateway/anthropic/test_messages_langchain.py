"""LangChain's ChatAnthropic against /v1/messages: invoke, stream, a bind_tools round trip and
with_structured_output (a forced tool call underneath), on Claude's model names (aliased by the server)."""
from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from pydantic import BaseModel

from tests.gateway.anthropic.conftest import KEY

langchain_anthropic = pytest.importorskip("langchain_anthropic")


class Weather(BaseModel):
    """The weather in a city."""

    city: str


@pytest.fixture(scope="module")
def llm(server):
    return langchain_anthropic.ChatAnthropic(model="claude-haiku-4-5", base_url=server.url, api_key=KEY,
                                             temperature=0, max_tokens=8, max_retries=0, timeout=600)


def test_invoke_and_stream(llm):
    reply = llm.invoke("Name a fruit.")
    assert isinstance(reply.text, str) and reply.text
    assert reply.usage_metadata["input_tokens"] > 10 and 0 < reply.usage_metadata["output_tokens"] <= 8
    chunks = list(llm.stream("Name a fruit."))
    assert "".join(c.text for c in chunks) == reply.text                      # greedy: the same answer


def test_bind_tools_round_trip(llm):
    tooled = llm.bind_tools([Weather], tool_choice="Weather").bind(max_tokens=48)
    ask = HumanMessage("What is the weather in Paris?")
    called = tooled.invoke([ask])
    (call,) = called.tool_calls
    assert call["name"] == "Weather" and isinstance(call["args"]["city"], str) and call["id"].startswith("toolu_")
    answer = llm.bind_tools([Weather]).invoke([ask, called, ToolMessage("Sunny, 24 C", tool_call_id=call["id"])])
    assert answer.content or answer.tool_calls


def test_with_structured_output(llm):
    structured = llm.model_copy(update={"max_tokens": 48}).with_structured_output(Weather)
    result = structured.invoke("The weather in Rome, please.")
    assert isinstance(result, Weather) and result.city
