"""The shared conversation path on its own, over a fake engine: `build_generation` renders the prompt (tools
through the template that takes them, or the model's tool format's prompt for one that does not), keeps the
messages for a backend that renders its own, builds the grammar of a forced tool choice or an output format,
and prepares one request whose prompt errors name the face's field; `plan_tools` refuses bad tools in the
face's own paths (WirePaths)."""
from __future__ import annotations

import pytest

from conch.engine import SamplingParams
from conch.engine.errors import ModelNotFound
from conch.gateway.conversation import Conversation, WirePaths, build_generation
from conch.gateway.conversation.tools import plan_tools
from conch.gateway.errors import APIError
from tests.gateway.conversation.fake_engine import WITHOUT_TOOLS, fake_engine

HELLO = ({"role": "user", "content": "Hello"},)
WEATHER = {"type": "function", "function": {"name": "weather", "description": "the weather in a city",
                                            "parameters": {"type": "object", "properties": {
                                                "city": {"type": "string"}}, "required": ["city"]}}}
ANTHROPIC = WirePaths(tool_schema="tools.{index}.input_schema", messages="messages",
                      output_format="output_config.format")


def conversation(**fields) -> Conversation:
    return Conversation(**{"model": "m", "messages": HELLO, "sampling": SamplingParams(max_tokens=5), **fields})


async def test_a_plain_conversation_is_one_rendered_prompt_with_no_grammar():
    engine = fake_engine()
    request, plan = await build_generation(conversation(paths=ANTHROPIC), engine, "r1")
    assert request.prompt == "<user>Hello\n<assistant>" and request.chat is None and request.grammar is None
    assert request.params.max_tokens == 5 and request.id == "r1" and not request.add_special_tokens
    assert not plan.parses_calls and plan.choice.mode == "none"
    assert engine.prepared == [(request, "messages")]          # prompt errors name the face's field


async def test_tools_go_through_a_template_that_takes_them_and_auto_has_no_grammar():
    request, plan = await build_generation(conversation(tools=(WEATHER,)), fake_engine(), "r")
    assert request.prompt.startswith("[tools: weather]") and request.grammar is None
    assert plan.parses_calls and plan.choice.mode == "auto" and [t.name for t in plan.tools] == ["weather"]


async def test_a_template_without_tools_gets_the_tool_formats_prompt():
    request, plan = await build_generation(conversation(tools=(WEATHER,)), fake_engine(WITHOUT_TOOLS), "r")
    assert "[tools:" not in request.prompt and "weather" in request.prompt   # hermes' prompt names the tool
    assert plan.format is not None


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "weather"}}])
async def test_a_forced_tool_choice_is_a_grammar(choice):
    request, plan = await build_generation(conversation(tools=(WEATHER,), tool_choice=choice), fake_engine(), "r")
    assert request.grammar is not None and request.grammar is plan.grammar


async def test_an_output_format_is_a_grammar_and_cannot_join_a_forced_tool_choice():
    fmt = (("output_config.format", "json_schema", {"type": "object"}),)
    request, _ = await build_generation(conversation(constraints=fmt, paths=ANTHROPIC), fake_engine(), "r")
    assert request.grammar is not None
    with pytest.raises(APIError, match="cannot be combined with tool_choice 'required'") as refused:
        await build_generation(conversation(constraints=fmt, paths=ANTHROPIC, tools=(WEATHER,),
                                            tool_choice="required"), fake_engine(), "r")
    assert refused.value.param == "output_config.format"


async def test_a_backend_that_renders_its_own_gets_the_messages():
    request, _ = await build_generation(conversation(tools=(WEATHER,)), fake_engine(chat_input=True), "r")
    assert request.prompt is None and request.chat is not None and request.grammar is None
    assert "weather" in str(request.chat.messages)              # Conch's tool prompt, for its own parser
    with pytest.raises(APIError, match="needs constrained decoding") as refused:
        await build_generation(conversation(tools=(WEATHER,), tool_choice="required"),
                               fake_engine(chat_input=True), "r")
    assert refused.value.param == "tool_choice"


@pytest.mark.parametrize(("fields", "param"), [
    ({"tool_choice": "required"}, "tool_choice"),                                   # no tools to choose
    ({"tools": (WEATHER, WEATHER)}, "tools"),                                       # names not unique
    ({"tools": (WEATHER,), "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tools": ({"type": "function", "function": {"name": "bad", "parameters": {"type": "nope"}}},)},
     "tools.0.input_schema"),                                                        # the face's schema path
])
def test_the_tool_plan_refuses_in_the_faces_paths(fields, param):
    with pytest.raises(APIError) as refused:
        plan_tools(conversation(paths=ANTHROPIC, **fields), "hermes", 4)
    assert refused.value.status == 400 and refused.value.param == param


def test_parallel_tool_calls_false_bounds_a_required_choice_to_one_call():
    one = plan_tools(conversation(tools=(WEATHER,), tool_choice="required", parallel_tool_calls=False), "hermes", 4)
    many = plan_tools(conversation(tools=(WEATHER,), tool_choice="required"), "hermes", 4)
    assert one.grammar is not None and many.grammar is not None and one.grammar != many.grammar


async def test_an_unknown_model_is_the_engines_404():
    with pytest.raises(ModelNotFound, match="does not exist"):
        await build_generation(conversation(model="nope"), fake_engine(), "r")
