"""OutputReader's finish_reason goes through the one map (RequestStatus.finish_reason): a choice whose text
parsed as calls ends FINISHED_TOOL_CALLS ("tool_calls") unless the caller named the function."""
from __future__ import annotations

import pytest

from conch.agents.tool_choice import ToolChoice
from conch.agents.tool_formats import get_format
from conch.engine import RequestStatus
from conch.gateway.conversation import OutputReader

CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>'
S = RequestStatus


@pytest.mark.parametrize("mode, text, status, reason", [
    ("auto", CALL, S.FINISHED_STOPPED, "tool_calls"),
    ("required", CALL, S.FINISHED_STOPPED, "tool_calls"),
    ("function", CALL, S.FINISHED_STOPPED, "stop"),          # a named choice is the caller's decision
    ("auto", "just prose", S.FINISHED_STOPPED, "stop"),
    ("auto", CALL, S.FINISHED_LENGTH, "length"),
    ("auto", CALL, S.FINISHED_ABORTED, "abort"),
])
def test_finish_reason_through_the_one_map(mode, text, status, reason):
    choice = ToolChoice(mode, "add" if mode == "function" else None)
    output = OutputReader(get_format("hermes").new_parser(eager=choice.forced), choice)
    output.whole(text)
    assert output.finish_reason(status) == reason
    assert choice.final_status(status, output.has_calls).finish_reason == reason


def test_without_tools_the_status_maps_alone():
    output = OutputReader(None)
    output.whole("hello")
    assert [output.finish_reason(s) for s in (S.FINISHED_STOPPED, S.FINISHED_LENGTH, None)] == ["stop", "length", None]
    assert S.FINISHED_TOOL_CALLS.finish_reason == "tool_calls"
