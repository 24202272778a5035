"""The pythonic format's grammar offers only what a keyword call can say: anything else is refused with a
ToolFormatError naming the field (a 400 at the gateway), never written in a form its parser cannot read."""
from __future__ import annotations

import pytest

from conch.agents.tool_choice import ToolChoice
from conch.agents.tool_formats import ToolFormatError, get_format
from conch.agents.tools import ToolFunction

OK = {"type": "object", "properties": {"x": {"type": "integer"}}}


@pytest.mark.parametrize("name,parameters,param", [
    ("get-weather", OK, "tools.1.function.name"),
    ("get_weather", {"anyOf": [OK, {"type": "object"}]}, "tools.1.function.parameters"),
    ("get_weather", {"type": "object", "properties": {"x": {}}, "minProperties": 1}, "tools.1.function.parameters"),
    ("get_weather", {"type": "object", "properties": {"class": {"type": "string"}}}, "tools.1.function.parameters"),
    ("get_weather", {"type": "object", "properties": {"my-city": {"type": "string"}}}, "tools.1.function.parameters"),
    ("get_weather", {"type": "object", "properties": {}, "required": ["city"]}, "tools.1.function.parameters"),
    ("get_weather", {"type": "object", "properties": {"x": False}, "required": ["x"]}, "tools.1.function.parameters"),
])
def test_what_a_keyword_call_cannot_say_is_refused(name, parameters, param):
    tools = [ToolFunction("fine", "", OK), ToolFunction(name, "", parameters)]
    with pytest.raises(ToolFormatError) as err:
        get_format("pythonic").grammar(tools, ToolChoice("required"), 2)
    assert err.value.param == param and "pythonic" in err.value.message


def test_only_the_chosen_tool_is_checked_and_json_formats_take_any_schema():
    tools = [ToolFunction("fine", "", OK), ToolFunction("get-weather", "", {"anyOf": [OK]})]
    assert get_format("pythonic").grammar(tools, ToolChoice("function", "fine"), 2) is not None
    for name in ("hermes", "llama3", "mistral"):
        assert get_format(name).grammar(tools, ToolChoice("required"), 2) is not None


def test_optional_keywords_may_all_be_left_out_and_a_false_one_is_never_written():
    tool = ToolFunction("f", "", {"type": "object", "properties": {"a": {"type": "integer"}, "b": False}})
    lark = get_format("pythonic").grammar([tool], ToolChoice("required"), 1).lark
    assert 'fn_0: "f(" kw_0_0a? ")"' in lark and "b=" not in lark
