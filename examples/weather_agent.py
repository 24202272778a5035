"""A weather-style tool loop with the openai SDK against `make run` (sync, then streaming).

    python examples/weather_agent.py [--base-url http://127.0.0.1:8000/v1]
"""
from __future__ import annotations

import argparse
import json

from openai import OpenAI

from conch.agents.loop import Agent

MODEL = "smollm2-135m-instruct"


def weather(city: str) -> str:
    """Current weather in a city"""
    return {"paris": "sunny, 21 C", "oslo": "snow, -3 C"}.get(city.lower(), "cloudy, 15 C")


def agent_loop(client: OpenAI) -> None:
    agent = Agent(client, MODEL, first_tool_choice="required", tool_choice_after_results="none", max_tokens=80,
                  temperature=0)
    agent.tool(weather)
    result = agent.run("What's the weather in Paris?")
    for name, arguments, output in result.calls:
        print(f"called {name}({arguments}) -> {output}")
    print("answer:", result.answer)


def streamed_call(client: OpenAI) -> None:
    tools = [{"type": "function", "function": {"name": "weather", "description": "Current weather in a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    with client.beta.chat.completions.stream(model=MODEL, messages=[{"role": "user", "content": "Weather in Oslo?"}],
                                             tools=tools, tool_choice="required", parallel_tool_calls=False,
                                             temperature=0, max_tokens=60) as stream:
        for event in stream:
            if event.type == "tool_calls.function.arguments.delta":
                print("arguments so far:", event.arguments)
        call = stream.get_final_completion().choices[0].message.tool_calls[0]
    print("streamed call:", call.function.name, json.loads(call.function.arguments))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    client = OpenAI(base_url=parser.parse_args().base_url, api_key="none")
    agent_loop(client)
    streamed_call(client)


if __name__ == "__main__":
    main()
