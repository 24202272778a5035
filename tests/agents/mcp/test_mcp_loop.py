"""agents/mcp/loop.py with a scripted "model turn" against real MCP servers: the calls run, results feed the
next turn, approvals stop and resume the loop, max_tool_calls, tools outside allowed_tools never offered,
failures reported as events, and a consumer that goes away cancels the call in flight."""
from __future__ import annotations

import asyncio
import json

import pytest

from conch.agents.mcp import ApprovalRule, Limits
from conch.agents.mcp.access import ServerOffer
from conch.agents.mcp.events import (Approval, ApprovalRequested, CallArguments, CallCompleted, CallFailed,
                                     CallInProgress,
                                     Ending, ListToolsCompleted, ListToolsFailed, ListToolsInProgress, LoopOutcome,
                                     ModelTurn, ToolCallRequest, TurnDone, TurnInput)
from conch.agents.mcp.loop import McpLoop, iterate
from conch.agents.mcp.types import ServerTarget, Transport
from tests.mcp_servers import free_port

NEVER = ApprovalRule.parse("never")


def offer(url: str, label: str = "calc", tools=None, approval: ApprovalRule = NEVER) -> ServerOffer:
    return ServerOffer(ServerTarget(label, Transport.STREAMABLE_HTTP, url=url), tools, approval)


class Script:
    """A fake model: each turn takes the next scripted reply; it records what each turn was offered."""

    def __init__(self, *turns: ModelTurn) -> None:
        self.turns, self.inputs = list(turns), []

    async def __call__(self, seen: TurnInput) -> ModelTurn:
        self.inputs.append(seen)
        return self.turns.pop(0) if self.turns else ModelTurn("done")


def calls(*pairs) -> ModelTurn:
    return ModelTurn("", tuple(ToolCallRequest(name, json.dumps(args), f"c{i}") for i, (name, args) in
                                enumerate(pairs)))


async def run(loop: McpLoop, resume=()) -> tuple[list, LoopOutcome]:
    events: list = []

    async def emit(event) -> None:
        events.append(event)

    outcome = await asyncio.wait_for(loop.run(emit, resume), 60)
    return events, outcome


async def test_runs_calls_until_the_model_answers(tools_http):
    script = Script(calls(("add", {"a": 2, "b": 3})), calls(("lookup", {"city": "Tokyo"})), ModelTurn("5, Japan"))
    events, outcome = await run(McpLoop([offer(tools_http.url)], script))
    kinds = [type(e) for e in events]
    assert kinds == [ListToolsInProgress, ListToolsCompleted, TurnDone, CallInProgress, CallArguments,
                     CallCompleted, TurnDone, CallInProgress, CallArguments, CallCompleted, TurnDone]
    assert [e.output.text for e in events if isinstance(e, CallCompleted)] == ["5", "Japan"]
    assert outcome.ending is Ending.ANSWERED and outcome.last_turn.content == "5, Japan"
    assert [r.output for r in script.inputs[2].records] == ["5", "Japan"]        # results fed back
    assert events[4].call.arguments == '{"a": 2, "b": 3}' and events[4].call.id.startswith("mcp_")


async def test_tools_outside_allowed_tools_are_never_offered_nor_run(tools_http):
    script = Script(calls(("lookup", {"city": "Lima"})))
    events, outcome = await run(McpLoop([offer(tools_http.url, tools=frozenset({"add"}))], script))
    assert [t.name for t in script.inputs[0].tools] == ["add"]
    assert not [e for e in events if isinstance(e, CallInProgress)]
    assert outcome.ending is Ending.ANSWERED
    assert [c.name for c in outcome.function_calls] == ["lookup"]      # not MCP: the client's to handle


async def test_approval_stops_the_loop_and_resumes(tools_http):
    rule = ApprovalRule.parse({"never": {"tool_names": ["lookup"]}})
    script = Script(calls(("lookup", {"city": "Paris"}), ("add", {"a": 1, "b": 1})))
    events, outcome = await run(McpLoop([offer(tools_http.url, approval=rule)], script))
    assert outcome.ending is Ending.APPROVAL
    assert [type(e) for e in events][-4:] == [CallInProgress, CallArguments, CallCompleted, ApprovalRequested]
    (pending,) = outcome.pending
    assert pending.name == "add" and pending.id.startswith("mcpr_")

    resumed = Script(ModelTurn("2"))
    loop = McpLoop([offer(tools_http.url, approval=rule)], resumed, known_tools=outcome.tools)
    events, outcome = await run(loop, [Approval(pending, approve=True)])
    assert ListToolsInProgress not in [type(e) for e in events]             # listed once per response
    assert [e.output.text for e in events if isinstance(e, CallCompleted)] == ["2"]
    assert outcome.ending is Ending.ANSWERED and resumed.inputs[0].records[0].output == "2"

    denied = Script(ModelTurn("ok"))
    loop = McpLoop([offer(tools_http.url, approval=rule)], denied, known_tools=outcome.tools)
    events, outcome = await run(loop, [Approval(pending, approve=False, reason="too costly")])
    assert not [e for e in events if isinstance(e, CallInProgress)]
    assert denied.inputs[0].records[0].error == "the user denied this call: too costly"


def test_require_approval_values():
    assert ApprovalRule.parse(None).needs("x") and ApprovalRule.parse("always").needs("x")
    assert not ApprovalRule.parse("never").needs("x")
    only_never = ApprovalRule.parse({"never": {"tool_names": ["a"]}})
    assert not only_never.needs("a") and only_never.needs("b")
    only_always = ApprovalRule.parse({"always": {"tool_names": ["a"]}})
    assert only_always.needs("a") and not only_always.needs("b")
    for bad in ("sometimes", {"never": ["a"]}, {"maybe": {}}, {"never": {"tool_names": "a"}}):
        with pytest.raises(ValueError, match="require_approval"):
            ApprovalRule.parse(bad)


async def test_max_tool_calls_then_the_model_must_answer(tools_http):
    script = Script(calls(("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})), calls(("add", {"a": 3, "b": 3})))
    events, outcome = await run(McpLoop([offer(tools_http.url)], script, max_tool_calls=1))
    assert len([e for e in events if isinstance(e, CallCompleted)]) == 1
    assert script.inputs[1].tools == ()                     # the budget is spent: no MCP tool offered
    assert outcome.ending is Ending.ANSWERED


async def test_failures_are_events_and_the_loop_goes_on(tools_http, failing, hanging):
    down = offer(f"http://127.0.0.1:{free_port()}/mcp", label="down")
    script = Script(calls(("explode", {}), ("wait", {}), ("add", {"a": 1, "b": 2})))
    loop = McpLoop([down, offer(failing.url, "err"), offer(hanging.url, "slow"), offer(tools_http.url)], script,
                   limits=Limits(call_timeout_s=1.5))
    events, outcome = await run(loop)
    failed = [e for e in events if isinstance(e, ListToolsFailed)]
    assert [e.server_label for e in failed] == ["down"] and failed[0].error.startswith("unreachable")
    errors = {e.call.name: e.error for e in events if isinstance(e, CallFailed)}
    assert errors["explode"].startswith("tool_error") and errors["wait"].startswith("timeout")
    assert [e.output.text for e in events if isinstance(e, CallCompleted)] == ["3"]
    assert outcome.ending is Ending.ANSWERED and len(script.inputs[1].records) == 3


async def test_bad_arguments_fail_the_call_not_the_loop(tools_http):
    bad = ModelTurn("", (ToolCallRequest("add", "[1, 2]"),))
    events, outcome = await run(McpLoop([offer(tools_http.url)], Script(bad)))
    (failure,) = [e for e in events if isinstance(e, CallFailed)]
    assert "not a JSON object" in failure.error and outcome.ending is Ending.ANSWERED


async def test_loop_deadline(tools_http):
    async def slow_model(seen: TurnInput) -> ModelTurn:
        await asyncio.sleep(3600)
        return ModelTurn("never")

    events, outcome = await run(McpLoop([offer(tools_http.url)], slow_model, limits=Limits(loop_timeout_s=2)))
    assert outcome.ending is Ending.TIMEOUT


async def test_a_consumer_that_leaves_cancels_the_call(hanging):
    seen = []

    class Observer:
        def on_mcp_call(self, server, tool, outcome, seconds):
            seen.append((server, tool, outcome))

    loop = McpLoop([offer(hanging.url, "slow")], Script(calls(("wait", {}))), limits=Limits(call_timeout_s=600),
                   observer=Observer())
    stream = iterate(loop)
    async for event in stream:
        if isinstance(event, CallArguments):
            break                                    # the client went away while the call runs
    await asyncio.wait_for(stream.aclose(), 10)      # closing cancels the loop's task and the call in flight
    assert seen == [("slow", "wait", "cancelled")]


async def test_iterate_ends_with_the_outcome(tools_http):
    items = [item async for item in iterate(McpLoop([offer(tools_http.url)], Script(ModelTurn("hi"))))]
    assert isinstance(items[-1], LoopOutcome) and items[-1].ending is Ending.ANSWERED
    assert isinstance(items[0], ListToolsInProgress)


def test_records_as_chat_messages():
    from conch.agents.mcp.events import CallRecord, McpCall
    from conch.agents.mcp.transcript import as_messages, as_tools
    from conch.agents.mcp.types import McpTool

    ok = CallRecord(McpCall("mcp_1", "calc", "add", '{"a": 1}'), output="1")
    bad = CallRecord(McpCall("mcp_2", "calc", "add", "{}"), error="timeout: slow")
    messages = as_messages([ok, bad])
    assert [m["role"] for m in messages] == ["assistant", "tool", "assistant", "tool"]
    assert messages[0]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 1}'}
    assert messages[1] == {"role": "tool", "tool_call_id": "mcp_1", "content": "1"}
    assert messages[3]["content"] == "Error: timeout: slow"
    (tool,) = as_tools([McpTool("calc", "add", "Add.", {"type": "object", "properties": {}})])
    assert tool["function"]["name"] == "add" and tool["function"]["parameters"]["type"] == "object"


async def test_an_error_of_the_model_turn_leaves_as_itself(tools_http):
    """An engine error raised while sessions are open is the face's to map, never relabelled an MCP failure."""
    class EngineSaidNo(Exception):
        pass

    async def failing_model(seen: TurnInput) -> ModelTurn:
        raise EngineSaidNo("queue full")

    with pytest.raises(EngineSaidNo, match="queue full"):
        await run(McpLoop([offer(tools_http.url), offer(tools_http.url, "again")], failing_model))
