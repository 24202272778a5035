"""tool_choice required and named through every tool format, over a real server and the openai SDK, with the
tiny random-weights model: constrained decoding alone must make noise emit calls that the model's own format
parser reads back, with arguments valid under each function's schema. With EOS biased away a required answer
holds exactly max_parallel_tool_calls calls (each format's parallel form); parallel_tool_calls false, one."""
from __future__ import annotations

import functools
import json
import os

import jsonschema
import openai
import pytest

from conch.agents.tool_formats import format_names, get_format
from tests.conftest import start_server, write_repository
from tests.gateway.openai.tool_answers import ask
from tests.grammars.conftest import load_tokenizer

MAX_CALLS = 3
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city"], "additionalProperties": False}}}
ADD = {"type": "function", "function": {
    "name": "add", "description": "Add two integers",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 999},
                                                    "b": {"type": "integer", "minimum": 0, "maximum": 999}},
                   "required": ["a", "b"]}}}
TOOLS = [WEATHER, ADD]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@pytest.fixture
def no_early_end(fmt: str) -> dict[str, int]:
    """A logit_bias against ending early: EOS, and every token holding the character where the format's list
    closer parts from another call (mistral's and pythonic's "]", Kimi's "s" of `calls_section_end`, Gemma's
    "`" of the fence). Under the grammar they stay possible where they are all that is allowed, after the last
    allowed call, or inside a call where every allowed token holds one."""
    tokenizer, decoded = load_tokenizer(), _decoded()  # SmolLM2's, the tiny model's
    closer = _parting(get_format(fmt))
    closers = [i for i, text in enumerate(decoded) if closer and closer in text]
    return {str(i): -100 for i in [tokenizer.eos_token_id, *closers]}


@functools.cache
def _decoded() -> list[str]:
    tokenizer = load_tokenizer()
    return [tokenizer.decode([i]) for i in range(len(tokenizer))]


def _parting(fmt) -> str:
    """The first character of the list's closer that another call's opening does not share ("" if none)."""
    more, close = fmt.SEPARATOR + fmt.CALL_OPEN, fmt.LIST_CLOSE
    shared = len(os.path.commonprefix([more, close]))
    return close[shared] if shared < len(close) else ""


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    base = {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 8, "max_parallel_tool_calls": MAX_CALLS}
    write_repository(root, {f"tiny-{name}": {**base, "tool_call_parser": name} for name in format_names()})
    server = start_server(["--model-repository", str(root)], root)
    yield openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0, timeout=300)
    server.stop()


def _ask(client, fmt: str, stream: bool, **kwargs) -> tuple[str | None, str | None, list]:
    return ask(client, stream, **{"model": f"tiny-{fmt}", "tools": TOOLS, "max_tokens": 250, "temperature": 1.0,
                                  "seed": 7, "messages": [{"role": "user", "content": "Weather in Oslo? 2 + 2?"}],
                                  **kwargs})


def _check(calls: list, names: set[str]) -> None:
    assert len({call_id for call_id, _, _ in calls}) == len(calls)
    for call_id, name, arguments in calls:
        assert call_id.startswith("call_") and name in names, (call_id, name)
        jsonschema.validate(json.loads(arguments), SCHEMAS[name])


# streamed, each format's parallel calls run with -m slow (their parsers are tested at every split in
# tests/agents, and streamed calls here by test_named_writes_exactly_that_call)
@pytest.mark.parametrize("stream", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["whole", "stream"])
@pytest.mark.parametrize("fmt", format_names())
def test_required_writes_the_formats_parallel_calls(client, no_early_end, fmt, stream):
    finish, content, calls = _ask(client, fmt, stream, tool_choice="required", logit_bias=no_early_end)
    assert finish == "tool_calls" and content is None
    assert len(calls) == MAX_CALLS  # EOS only once the grammar allows nothing else
    _check(calls, {"get_weather", "add"})


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("fmt", format_names())
def test_named_writes_exactly_that_call(client, fmt, stream):
    finish, content, calls = _ask(client, fmt, stream, tool_choice={"type": "function", "function": {"name": "add"}})
    assert finish == "stop" and content is None and len(calls) == 1
    _check(calls, {"add"})


@pytest.mark.parametrize("fmt", format_names())
def test_parallel_tool_calls_false_allows_one_call(client, no_early_end, fmt):
    finish, _, calls = _ask(client, fmt, False, tool_choice="required", logit_bias=no_early_end,
                            parallel_tool_calls=False)
    assert finish == "tool_calls" and len(calls) == 1
    _check(calls, {"get_weather", "add"})


def test_pythonic_refuses_a_tool_it_cannot_write(client):
    bad = {"type": "function", "function": {"name": "get-weather", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError) as err:
        _ask(client, "pythonic", False, tools=[bad], tool_choice="required")
    assert err.value.body["param"] == "tools.0.function.name"
