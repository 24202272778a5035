"""The stream's block bookkeeping and its pings, over fake deltas (no server): events arrive in Anthropic's
order, parse as the anthropic package's own event types, and a request that waits is kept alive by pings."""
from __future__ import annotations

import asyncio
import json

from anthropic.types import RawMessageStreamEvent
from pydantic import TypeAdapter

from conch.agents.tools import ContentDelta, ToolCallDelta
from conch.engine import GenerationDelta, RequestStatus
from conch.engine.types import Usage
from conch.gateway.anthropic import events
from conch.gateway.anthropic.conversation import conversation
from conch.gateway.anthropic.schemas import MessagesRequest
from conch.gateway.conversation import OutputReader

EVENT = TypeAdapter(RawMessageStreamEvent)


def _parsed(raw: list[str]) -> list:
    out = []
    for chunk in raw:
        name, data = chunk.split("\n", 1)
        payload = json.loads(data.removeprefix("data: "))
        assert name == f"event: {payload['type']}"
        out.append(payload if payload["type"] in ("ping", "error") else EVENT.validate_python(payload))
    return out


def test_blocks_open_in_order_and_calls_get_their_fragments():
    blocks = events.Blocks()
    raw = []
    for piece in (ContentDelta("Let me look."), ToolCallDelta(0, "call_a", "search", ""),
                  ToolCallDelta(0, None, None, '{"q": '), ToolCallDelta(0, None, None, '"x"}'),
                  ToolCallDelta(1, "call_b", "open", ""), ToolCallDelta(1, None, None, "{}")):
        raw += blocks.write(piece)
    raw += blocks.close()
    kinds = [(e.type, e.index) for e in _parsed(raw)]
    assert kinds == [("content_block_start", 0), ("content_block_delta", 0), ("content_block_stop", 0),
                     ("content_block_start", 1), ("content_block_delta", 1), ("content_block_delta", 1),
                     ("content_block_stop", 1), ("content_block_start", 2), ("content_block_delta", 2),
                     ("content_block_stop", 2)]
    parsed = _parsed(raw)
    assert parsed[3].content_block.name == "search" and parsed[3].content_block.id.startswith("toolu_")
    assert "".join(e.delta.partial_json for e in parsed[4:6]) == '{"q": "x"}'


async def _slow(deltas: list[GenerationDelta], gate: asyncio.Event):
    await gate.wait()                      # the request waits in the queue until the test lets it through
    for d in deltas:
        yield d


def test_a_waiting_request_is_pinged_then_streamed(monkeypatch):
    monkeypatch.setattr(events, "GRACE_S", 0.01)
    monkeypatch.setattr(events, "PING_S", 0.01)
    finished = GenerationDelta("r", text=" there", status=RequestStatus.FINISHED_STOPPED, stop_reason="END",
                               usage=Usage(10, 2, cached_tokens=4))

    async def run() -> list[str]:
        gate = asyncio.Event()
        deltas = _slow([GenerationDelta("r", text="Hi"), finished], gate)
        first = await events.first_delta(deltas)
        assert not first.done()
        out, stream = [], events.message_stream({"id": "msg_1", "type": "message", "role": "assistant",
                                                 "model": "m"}, 10, first, deltas, OutputReader(None), ["END"])
        async for chunk in stream:
            out.append(chunk)
            if sum('"ping"' in c for c in out) == 3:
                gate.set()
        return out

    parsed = _parsed(asyncio.run(run()))
    kinds = [e["type"] if isinstance(e, dict) else e.type for e in parsed]
    assert kinds[:4] == ["message_start", "ping", "ping", "ping"]
    assert kinds[4:] == ["content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
                         "message_delta", "message_stop"]
    delta = parsed[-2]
    assert (delta.delta.stop_reason, delta.delta.stop_sequence) == ("stop_sequence", "END")
    assert (delta.usage.input_tokens, delta.usage.cache_read_input_tokens, delta.usage.output_tokens) == (6, 4, 2)


def _body(system) -> MessagesRequest:
    return MessagesRequest.model_validate({"model": "claude-x", "max_tokens": 4, "system": system,
                                           "messages": [{"role": "user", "content": "hi"}]})


def test_the_billing_line_is_dropped_unless_kept():
    system = [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1; cch=93ab1;"},
              {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}]
    dropped = conversation(_body(system), "m")
    kept = conversation(_body(system), "m", keep_billing_header=True)
    assert dropped.messages[0] == {"role": "system", "content": "You are Claude Code."}
    assert kept.messages[0]["content"].startswith("x-anthropic-billing-header") and dropped.model == "m"
