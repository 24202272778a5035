"""A Messages stream, as Anthropic sends it:

    message_start  (the message, content [], usage so far)   ping   (again every PING_S while nothing comes)
    per block:     content_block_start  content_block_delta*  content_block_stop
                   thinking blocks get thinking_delta, then one signature_delta (the seal of the whole
                   thinking) before they stop; a redacted_thinking block (display "omitted") starts whole,
                   once its reasoning has ended; text blocks get text_delta; tool_use blocks ({"input": {}})
                   get input_json_delta, whose partial_json pieces concatenate to the call's input (the
                   SDK's accumulator parses them)
    message_delta  (stop_reason, stop_sequence, usage: cumulative)   message_stop

Blocks are numbered from 0 in the order they open and never interleave: a block is stopped before the next
starts. A failure once the stream has started is an `error` event, and the stream ends."""
from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncGenerator, AsyncIterator

from conch.agents.reasoning import ReasoningDelta
from conch.agents.tools import ContentDelta, ToolCallDelta
from conch.engine import GenerationDelta
from conch.gateway.anthropic.errors import error_event
from conch.gateway.anthropic.output import stop_of, thinking_block, tool_use_id, usage
from conch.gateway.conversation import OutputReader
from conch.gateway.choices import Choice
from conch.gateway.conversation.output import OutputEvent
from conch.gateway.conversation.sealed import seal
from conch.gateway.streaming import sse_named

GRACE_S = 1.0   # the route waits this long for the first delta: a failure by then is a status, not an event
PING_S = 5.0    # a ping this often while the request waits for a batch slot (or prefills a long prompt)


def _event(kind: str, **fields) -> str:
    return sse_named(kind, {"type": kind, **fields})


class Blocks:
    """The content blocks of one streamed message: which is open, and which block each call's deltas go to."""

    def __init__(self, omitted: bool = False) -> None:
        self._count = 0
        self._open: str | None = None            # "thinking" | "text" | "tool_use" | None
        self._calls: dict[int, int] = {}         # the reader's call index -> block index
        self._omitted = omitted                  # thinking display "omitted": redacted_thinking
        self._thought = ""                       # the reasoning of the open (or held) thinking block

    def write(self, event: OutputEvent) -> list[str]:
        if isinstance(event, ReasoningDelta):
            out = [] if self._omitted or self._open == "thinking" else self._start(
                {"type": "thinking", "thinking": "", "signature": ""})
            self._thought += event.text       # after _start: closing the previous block must not end this one
            if self._omitted:
                return []
            return out + [self._delta(self._count - 1, {"type": "thinking_delta", "thinking": event.text})]
        out = self._end_thinking()
        if isinstance(event, ContentDelta):
            out += [] if self._open == "text" else self._start({"type": "text", "text": ""})
            return out + [self._delta(self._count - 1, {"type": "text_delta", "text": event.text})]
        assert isinstance(event, ToolCallDelta)
        if event.is_first:
            out += self._start({"type": "tool_use", "id": tool_use_id(), "name": event.name, "input": {}})
            self._calls[event.index] = self._count - 1
        if event.arguments_fragment:
            block = self._calls[event.index]
            out.append(self._delta(block, {"type": "input_json_delta", "partial_json": event.arguments_fragment}))
        return out

    def _end_thinking(self) -> list[str]:
        """The thinking block's last events, once the reasoning has ended (the answer starts, or the stream)."""
        if not self._thought:
            return []
        thought, self._thought = self._thought, ""
        if self._omitted:
            return self._start(thinking_block(thought, omitted=True))
        return [self._delta(self._count - 1, {"type": "signature_delta", "signature": seal(thought)})]

    def close(self) -> list[str]:
        if self._thought:
            return self._end_thinking() + self.close()
        if self._open is None:
            return []
        self._open = None
        return [_event("content_block_stop", index=self._count - 1)]

    def _start(self, block: dict) -> list[str]:
        out = self.close()
        self._open = block["type"]
        self._count += 1
        return out + [_event("content_block_start", index=self._count - 1, content_block=block)]

    @staticmethod
    def _delta(index: int, delta: dict) -> str:
        return _event("content_block_delta", index=index, delta=delta)


async def first_delta(deltas: AsyncIterator[GenerationDelta]) -> asyncio.Future:
    """The first delta, awaited up to GRACE_S here so that an early failure (a full queue, a bad request the
    engine refuses) raises now, as a status; a request still waiting is streamed with pings."""
    first = asyncio.ensure_future(deltas.__anext__())
    await asyncio.wait({first}, timeout=GRACE_S)
    if first.done() and not isinstance(first.exception(), (StopAsyncIteration, type(None))):
        first.result()
    return first


async def message_stream(message: dict, prompt_tokens: int, first: asyncio.Future,
                         deltas: AsyncGenerator[GenerationDelta, None], output: OutputReader,
                         stop_sequences: list[str], omitted: bool = False) -> AsyncIterator[str]:
    """`message` is the message object without content; closing the stream (a client that hung up) aborts
    the generation. `omitted`: the client asked thinking display "omitted"."""
    choice, blocks = Choice(0), Blocks(omitted)
    try:
        cached = first.result().cached_tokens if first.done() and first.exception() is None else 0
        yield _event("message_start", message={**message, "content": [], "stop_reason": None,
                                               "stop_sequence": None, "usage": usage(prompt_tokens, cached, 0)})
        yield _event("ping")
        while not (await asyncio.wait({first}, timeout=PING_S))[0]:
            yield _event("ping")
        if isinstance(first.exception(), StopAsyncIteration):
            return
        for event in _written(first.result(), choice, blocks, output, stop_sequences):
            yield event
        async for delta in deltas:
            for event in _written(delta, choice, blocks, output, stop_sequences):
                yield event
    except Exception as exc:
        yield error_event(exc)
    finally:
        if not first.done():
            first.cancel()
            with contextlib.suppress(BaseException):
                await first
        await deltas.aclose()


def _written(delta: GenerationDelta, choice: Choice, blocks: Blocks, output: OutputReader,
             stop_sequences: list[str]) -> list[str]:
    """The events one delta makes (the last delta: the closing ones too)."""
    choice.add(delta)
    if delta.error:
        return [error_event(delta.error)]
    events = [e for piece in output.feed(delta.text) for e in blocks.write(piece)]
    if not delta.finished:
        return events
    events += [e for piece in output.finish() for e in blocks.write(piece)] + blocks.close()
    stop = stop_of(delta.status, delta.stop_reason, stop_sequences, output)
    return events + [
        _event("message_delta", delta={"stop_reason": stop.reason, "stop_sequence": stop.sequence},
               usage=usage(choice.prompt_tokens, choice.cached_tokens, choice.completion_tokens,
                           choice.reasoning_tokens)),
        _event("message_stop")]
