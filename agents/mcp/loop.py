"""The MCP loop, independent of HTTP: list the offered servers' tools, let the model turn, run its MCP calls,
feed the results back, and turn again, until the model answers, a call waits for approval, or time runs out.

    loop = McpLoop(offers, turn=generate_one_turn, limits=Limits(), max_tool_calls=3)
    outcome = await loop.run(emit)            # emit(event) for every LoopEvent, in order
    async for item in iterate(loop): ...      # the same as an iterator: LoopEvents, then the LoopOutcome

`turn(TurnInput) -> ModelTurn` is the caller's: it renders the prompt with the offered tools and the records so
far and generates once. Invariants: a tool is offered only if its server's offer allows it (so a tool plan's
grammar built from TurnInput.tools never lets the model name another); at most `max_tool_calls` MCP calls run
(then the model turns once more with no MCP tools, to answer); every step is bounded by the loop's deadline;
sessions live as long as `run` and close with it; cancelling `run` cancels the call in flight.
"""
from __future__ import annotations

import asyncio
import json
import uuid
from contextlib import AsyncExitStack, aclosing, suppress
from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence

import anyio

from conch.agents.mcp.access import ServerOffer
from conch.agents.mcp.client import McpSession, open_session
from conch.agents.mcp.events import (Approval, ApprovalRequested, CallArguments, CallCompleted, CallFailed,
                                     CallInProgress,
                                     CallRecord, Ending, ListToolsCompleted, ListToolsFailed, ListToolsInProgress,
                                     LoopEvent, LoopOutcome, McpCall, ModelTurn, TurnDone, TurnInput)
from conch.agents.mcp.metrics import CallObserver
from conch.agents.mcp.types import FailureKind, Limits, McpFailure, McpTool

Turn = Callable[[TurnInput], Awaitable[ModelTurn]]
Emit = Callable[[LoopEvent], Awaitable[None]]


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclass
class _State:
    deadline: float
    sessions: dict[str, McpSession] = field(default_factory=dict)
    tools: dict[str, tuple[McpTool, ...]] = field(default_factory=dict)
    by_name: dict[str, tuple[ServerOffer, McpTool]] = field(default_factory=dict)
    records: list[CallRecord] = field(default_factory=list)
    calls_made: int = 0

    def remaining(self) -> float:
        return self.deadline - anyio.current_time()


@dataclass
class McpLoop:
    offers: Sequence[ServerOffer]
    turn: Turn
    limits: Limits = field(default_factory=Limits)
    max_tool_calls: int | None = None
    observer: CallObserver | None = None
    known_tools: Mapping[str, tuple[McpTool, ...]] = field(default_factory=dict)   # listed earlier: not again
    ids: Callable[[str], str] = new_id

    async def run(self, emit: Emit, resume: Sequence[Approval] = ()) -> LoopOutcome:
        state = _State(anyio.current_time() + self.limits.loop_timeout_s)
        try:
            async with AsyncExitStack() as stack:
                for offer in self.offers:
                    await self._connect(offer, stack, emit, state)
                for approval in resume:
                    await self._resume(approval, emit, state)
                return await self._turns(emit, state)
        except McpFailure as failure:                    # a session broke under a step
            return self._outcome(Ending.FAILED, state, error=failure.message)

    async def _turns(self, emit: Emit, state: _State) -> LoopOutcome:
        last = None
        for _ in range(self.limits.max_turns):
            spent = self.max_tool_calls is not None and state.calls_made >= self.max_tool_calls
            turn = None
            with anyio.move_on_after(max(0.0, state.remaining())):
                turn = await self.turn(TurnInput(() if spent else self._offered(state), tuple(state.records)))
            if turn is None:
                return self._outcome(Ending.TIMEOUT, state, last)
            last = turn
            await emit(TurnDone(turn))
            calls = [c for c in turn.calls if c.name in state.by_name] if not spent else []
            if not calls:
                return self._outcome(Ending.ANSWERED, state, turn)
            pending = await self._run_calls(calls, emit, state)
            if pending:
                return self._outcome(Ending.APPROVAL, state, turn, pending)
        return self._outcome(Ending.MAX_TURNS, state, last)

    async def _connect(self, offer: ServerOffer, stack: AsyncExitStack, emit: Emit, state: _State) -> None:
        known = self.known_tools.get(offer.label)
        if known is None:
            await emit(ListToolsInProgress(offer.label))
        try:
            session = await stack.enter_async_context(open_session(offer.target, self.limits, self.observer))
            tools = offer.offered(known if known is not None else await session.list_tools())
        except McpFailure as failure:
            if known is None:
                await emit(ListToolsFailed(offer.label, failure.message, failure.kind))
            return
        state.sessions[offer.label], state.tools[offer.label] = session, tools
        for tool in tools:
            state.by_name.setdefault(tool.name, (offer, tool))     # a name two servers list: the first's
        if known is None:
            await emit(ListToolsCompleted(offer.label, tools))

    def _offered(self, state: _State) -> tuple[McpTool, ...]:
        return tuple(tool for _, tool in state.by_name.values())

    async def _run_calls(self, calls: list, emit: Emit, state: _State) -> tuple[McpCall, ...]:
        """Runs the turn's calls that need no approval; returns the approval requests for the others."""
        pending = []
        for request in calls:
            if self.max_tool_calls is not None and state.calls_made >= self.max_tool_calls:
                break                                   # the rest are ignored; the next turn gets no tools
            offer, tool = state.by_name[request.name]
            if offer.approval.needs(tool.name):
                call = McpCall(self.ids("mcpr"), offer.label, tool.name, request.arguments)
                pending.append(call)
                await emit(ApprovalRequested(call))
                continue
            await self._execute(McpCall(self.ids("mcp"), offer.label, tool.name, request.arguments), emit, state)
        return tuple(pending)

    async def _resume(self, approval: Approval, emit: Emit, state: _State) -> None:
        call = approval.call
        listed = state.by_name.get(call.name)
        if not approval.approve:
            reason = f": {approval.reason}" if approval.reason else ""
            state.records.append(CallRecord(call, error=f"the user denied this call{reason}"))
        elif listed is None or listed[0].label != call.server_label:
            state.records.append(CallRecord(call, error=f"tool {call.name} is not available on {call.server_label}"))
        else:
            await self._execute(McpCall(self.ids("mcp"), call.server_label, call.name, call.arguments), emit, state)

    async def _execute(self, call: McpCall, emit: Emit, state: _State) -> None:
        await emit(CallInProgress(call))
        await emit(CallArguments(call))
        state.calls_made += 1
        try:
            arguments = _arguments(call.arguments)
            if state.remaining() <= 0:
                raise McpFailure(FailureKind.TIMEOUT, "the MCP loop's time ran out before this call")
            output = await state.sessions[call.server_label].call(call.name, arguments, state.remaining())
        except McpFailure as failure:
            state.records.append(CallRecord(call, error=failure.message))
            await emit(CallFailed(call, failure.message, failure.kind))
            return
        state.records.append(CallRecord(call, output=output.text))
        await emit(CallCompleted(call, output))

    def _outcome(self, ending: Ending, state: _State, turn: ModelTurn | None = None,
                 pending: tuple[McpCall, ...] = (), error: str | None = None) -> LoopOutcome:
        return LoopOutcome(ending, turn, tuple(state.records), pending, dict(state.tools), error)


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise McpFailure(FailureKind.PROTOCOL, "the model's arguments are not a JSON object")
    return value


async def iterate(loop: McpLoop, resume: Sequence[Approval] = ()) -> AsyncIterator[LoopEvent | LoopOutcome]:
    """The loop's events, then its outcome (see `pump`)."""
    queue: asyncio.Queue = asyncio.Queue()

    async def emit(event: LoopEvent) -> None:
        await queue.put(event)

    async with aclosing(pump(queue, loop.run(emit, resume))) as items:
        async for item in items:
            yield item


async def pump(queue: asyncio.Queue, work: Coroutine[Any, Any, Any]) -> AsyncGenerator[Any, None]:
    """What `work` puts on `queue` as it comes, then its result. `work` runs in a task of its own (an MCP
    session's cancel scopes never cross a yield); a consumer that stops early (a client gone) cancels it, and
    the call in flight. Close it explicitly (`aclosing`) so that the cancel happens at once."""
    done = object()
    task = asyncio.create_task(work)
    task.add_done_callback(lambda _: queue.put_nowait(done))
    try:
        while (item := await queue.get()) is not done:
            yield item
        yield task.result()
    finally:
        if not task.done():
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
