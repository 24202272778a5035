"""LangChain against `make run`: bind_tools with a tool-call round trip, and structured output.

    python examples/langchain_tools.py [--base-url http://127.0.0.1:8000/v1]
"""
from __future__ import annotations

import argparse

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"sunny in {city}"


class City(BaseModel):
    name: str
    country: str


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    llm = ChatOpenAI(base_url=parser.parse_args().base_url, api_key="none", model="smollm2-135m-instruct",
                     temperature=0, max_tokens=80)
    question = HumanMessage("What's the weather in Oslo?")
    ai = llm.bind_tools([get_weather], tool_choice="get_weather").invoke([question])
    call = ai.tool_calls[0]
    print("tool call:", call["name"], call["args"])
    result = ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])
    print("answer:", llm.invoke([question, ai, result]).content)
    print("structured:", llm.with_structured_output(City, method="function_calling").invoke("Name a city in Italy."))


if __name__ == "__main__":
    main()
