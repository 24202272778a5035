"""An agent loop: a conversation against an OpenAI-compatible server with Python functions as tools,
run until the model answers in text or the step limit is reached.

    agent = Agent(client, "smollm2-135m-instruct")

    @agent.tool
    def get_weather(city: str) -> str:
        "The weather in a city."
        return "sunny"

    result = agent.run("What's the weather in Paris?")

`client` is anything shaped like the openai SDK's client (`client.chat.completions.create`).
"""
from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Callable

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


class StepLimitReached(RuntimeError):
    pass


def function_schema(fn: Callable[..., Any]) -> dict:
    """An OpenAI tool entry from a function's signature and docstring."""
    properties, required = {}, []
    for name, param in inspect.signature(fn).parameters.items():
        properties[name] = {"type": _JSON_TYPES.get(param.annotation, "string")}
        if param.default is inspect.Parameter.empty:
            required.append(name)
    return {"type": "function", "function": {
        "name": fn.__name__, "description": inspect.getdoc(fn) or "",
        "parameters": {"type": "object", "properties": properties, "required": required}}}


@dataclass
class AgentResult:
    answer: str
    messages: list[dict]
    steps: int
    calls: list[tuple[str, dict, Any]] = field(default_factory=list)   # (name, arguments, result)


class Agent:
    def __init__(self, client: Any, model: str, *, max_steps: int = 5, system: str | None = None,
                 first_tool_choice: str = "auto", tool_choice_after_results: str = "auto",
                 **create_kwargs: Any) -> None:
        self.client, self.model, self.max_steps = client, model, max_steps
        self.system, self.first_tool_choice = system, first_tool_choice
        self.after_results = tool_choice_after_results
        self.create_kwargs = create_kwargs
        self._tools: dict[str, Callable[..., Any]] = {}

    def tool(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        self._tools[fn.__name__] = fn
        return fn

    def run(self, prompt: str) -> AgentResult:
        messages: list[dict] = ([{"role": "system", "content": self.system}] if self.system else [])
        messages.append({"role": "user", "content": prompt})
        result = AgentResult("", messages, 0)
        schemas = [function_schema(fn) for fn in self._tools.values()]
        while result.steps < self.max_steps:
            tool_choice = self.after_results if result.calls else self.first_tool_choice
            reply = self.client.chat.completions.create(model=self.model, messages=messages, tools=schemas,
                                                        tool_choice=tool_choice, **self.create_kwargs)
            result.steps += 1
            message = reply.choices[0].message
            if not message.tool_calls:
                result.answer = message.content or ""
                return result
            messages.append({"role": "assistant", "content": message.content,
                             "tool_calls": [c.model_dump() for c in message.tool_calls]})
            for call in message.tool_calls:
                messages.append(self._call(call, result))
        raise StepLimitReached(f"no final answer after {self.max_steps} steps")

    def _call(self, call: Any, result: AgentResult) -> dict:
        name, arguments = call.function.name, json.loads(call.function.arguments or "{}")
        fn = self._tools.get(name)
        output = fn(**arguments) if fn is not None else f"error: no tool named {name}"
        result.calls.append((name, arguments, output))
        return {"role": "tool", "tool_call_id": call.id, "content": json.dumps(output, ensure_ascii=False)}
