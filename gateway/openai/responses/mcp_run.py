"""A response with MCP tools: agents/mcp/loop.py's loop, whose model turns are this face's engine requests.

    run = McpRun(p, engine, limits, observer, use_cache)
    events = await primed(run)              # a 4xx raises here; unprimed(run) for a background response
    async for event in events: ...          # output events, then the terminal one (the end stored)

Each turn renders the request's conversation, the MCP tools offered now (as function tools: one tool plan and
grammar for both, so a tool outside allowed_tools can never be called) and the loop's calls so far; its text
and function calls become items as they stream, its MCP calls are the loop's to run and write. A turn that
calls a function tool of the client's ends the loop: the call returns to the client (an MCP call of that turn
is not run). A forced tool_choice holds for the response's first turn only; the turns after an MCP call choose
freely (`auto`), or the model could never answer.

The loop runs in a task of its own; its events and the turns' reach the consumer through one queue, in order.
A consumer that stops (a client gone) cancels the task: the MCP call or the engine request in flight with it.
Priming runs the loop until its first model output (or its end), so a refused server, a bad tool_choice, a
listed tool whose input schema cannot be served (mcp_schemas.py) or a prompt past the context is a 4xx, not a
failed response; a turn the engine fails mid-generation is the response's failure (never a 500), before its
first output too.
"""
from __future__ import annotations

import asyncio
import logging
from contextlib import aclosing
from typing import Any, AsyncGenerator

from conch.agents.mcp import Limits, McpTool
from conch.agents.mcp.events import Ending, LoopOutcome, ModelTurn, TurnInput
from conch.agents.mcp.loop import McpLoop, pump
from conch.agents.mcp.metrics import CallObserver
from conch.agents.mcp.transcript import as_messages, as_tools
from conch.gateway.conversation import build_generation
from conch.gateway.errors import public_reason, to_api_error
from conch.gateway.choices import Choice
from conch.gateway.openai.responses.events import OutputBuilder
from conch.gateway.openai.responses.mcp_events import McpOutput
from conch.gateway.openai.responses.mcp_schemas import check_listed, forced_refusal
from conch.gateway.openai.responses.output import end_status, failure, usage_dict
from conch.gateway.openai.responses.run import (Prepared, TurnExtras, builder, client_left, conversation,
                                                  ending)
from conch.grammars import GrammarError

log = logging.getLogger(__name__)

_ENDINGS = {Ending.TIMEOUT: "the MCP loop ran past its time bound",
            Ending.MAX_TURNS: "the model kept calling MCP tools past the gateway's bound on model turns"}
_LISTING = ("response.mcp_list_tools.", "response.output_item.")


class TurnFailed(Exception):
    """The engine failed one model turn (its reason is fit for the client)."""


class McpRun:
    def __init__(self, p: Prepared, engine, limits: Limits, observer: CallObserver | None, use_cache: bool) -> None:
        assert p.mcp is not None
        self.p, self.engine, self.use_cache = p, engine, use_cache
        self.items: list[dict[str, Any]] = []            # the response's output: every turn's and MCP item
        self.turns: list[OutputBuilder] = []
        self.mcp = McpOutput(self.items, p.mcp.approvals, p.mcp.params)
        self.queue: asyncio.Queue = asyncio.Queue()
        self.loop = McpLoop(p.mcp.offers, self._turn, limits, p.body.max_tool_calls, observer, p.mcp.known)

    async def _emit(self, event: Any) -> None:
        for out in self.mcp.on(event):
            await self.queue.put(out)

    async def _turn(self, seen: TurnInput) -> ModelTurn:
        params = self.p.mcp.params if self.p.mcp is not None else {}
        await asyncio.to_thread(check_listed, seen.tools, params)
        choice = self._choice(seen)
        extras = TurnExtras(tuple(as_tools(seen.tools)), tuple(as_messages(seen.records)), choice)
        gen, plan = await build_generation(conversation(self.p, self.use_cache, extras), self.engine,
                                           f"{self.p.response_id}_{len(self.turns)}")
        out = builder(self.p, plan, self.items, frozenset(t.name for t in seen.tools))
        self.turns.append(out)
        try:
            async for delta in self.engine.generate(gen):
                for event in out.feed(delta):
                    await self.queue.put(event)
                if delta.error:
                    raise TurnFailed(public_reason(delta.error))
        except GrammarError as exc:                    # refused before generation: the forced tool's, by name
            refusal = forced_refusal(exc, self._forced(seen, choice), params)
            if refusal is None:
                raise
            raise refusal from exc
        for event in out.finish():
            await self.queue.put(event)
        if out.client_calls:                           # the client's call ends the loop
            return ModelTurn(calls=())
        return ModelTurn(calls=out.held_calls)

    def _forced(self, seen: TurnInput, choice: str | dict[str, Any] | None) -> tuple[McpTool, ...]:
        """The MCP tools the turn's grammar forces a call of, where they are all it forces."""
        if isinstance(choice, dict):
            return tuple(t for t in seen.tools if t.name == choice["function"]["name"])
        return seen.tools if choice == "required" and not self.p.tools.tools else ()

    def _choice(self, seen: TurnInput) -> str | dict[str, Any] | None:
        """The turn's tool_choice: the request's on its first turn, `auto` once an MCP call has run."""
        names = {t["function"]["name"] for t in self.p.tools.tools} | {t.name for t in seen.tools}
        choice = self.p.tools.tool_choice
        if not names:
            return None
        if choice == "none":
            return choice
        if self.turns or seen.records:
            return "auto"
        if isinstance(choice, dict) and choice["function"]["name"] not in names:
            return "auto"                              # the named MCP tool's server could not be listed
        return choice

    async def events(self) -> AsyncGenerator[Any, None]:
        """The output events as they happen, then the LoopOutcome; an exception of a turn raises here."""
        work = self.loop.run(self._emit, self.p.mcp.approvals if self.p.mcp else ())
        async with aclosing(pump(self.queue, work)) as items:
            async for item in items:
                yield item

    def terminal(self, outcome: LoopOutcome | None) -> tuple[tuple[str, Any], dict[str, str] | None]:
        """(the response's status and incomplete_details, its error) for how the loop ended."""
        if outcome is not None and outcome.ending in _ENDINGS:
            return ("failed", None), failure(_ENDINGS[outcome.ending])
        if outcome is not None and outcome.ending is Ending.FAILED:
            return ("failed", None), failure(outcome.error or "an MCP session failed")
        if outcome is not None and outcome.ending is Ending.APPROVAL:
            return ("completed", None), None
        last = self.turns[-1].status if self.turns else None
        return end_status(last), None

    def usage(self) -> dict[str, Any]:
        total = Choice(0)
        for turn in self.turns:
            total.prompt_tokens += turn.choice.prompt_tokens
            total.completion_tokens += turn.choice.completion_tokens
            total.cached_tokens += turn.choice.cached_tokens
        return usage_dict(total)


async def primed(run: McpRun) -> AsyncGenerator[dict[str, Any], None]:
    """The run's events, once it has reached its first model output (or its end): an exception before then
    raises here (a 4xx for the client)."""
    source = run.events()
    head: list[Any] = []
    try:
        while not head or _listing(head[-1]):      # primed: the listings and the first turn's first output
            head.append(await source.__anext__())
    except StopAsyncIteration:
        pass
    except TurnFailed as exc:                      # generation failed mid-turn: the response's failure, as later
        return _rest(run, head, _raising(exc))
    except BaseException:
        await source.aclose()
        raise
    return _rest(run, head, source)


async def _raising(exc: Exception) -> AsyncGenerator[Any, None]:
    raise exc
    yield                                          # an async generator that raises at its first item


def unprimed(run: McpRun) -> AsyncGenerator[dict[str, Any], None]:
    """The run's events, not started: every failure is the response's (a background response's run)."""
    return _rest(run, [], run.events())


def _listing(event: Any) -> bool:
    return isinstance(event, dict) and event["type"].startswith(_LISTING) and \
        event.get("item", {"type": "mcp_list_tools"})["type"] == "mcp_list_tools"


async def _rest(run: McpRun, head: list[Any],
                source: AsyncGenerator[Any, None]) -> AsyncGenerator[dict[str, Any], None]:
    outcome, error, code = None, None, "server_error"
    try:
        for item in head:
            if isinstance(item, LoopOutcome):
                outcome = item
            else:
                yield item
        async for item in source:
            if isinstance(item, LoopOutcome):
                outcome = item
            else:
                yield item
    except TurnFailed as exc:
        error = failure(str(exc))
    except (asyncio.CancelledError, GeneratorExit):
        await client_left(run.p, run.items, run.usage())
        raise
    except Exception as exc:                       # mid-run failure (the client going away is not an Exception)
        log.warning("response %s failed: %s", run.p.response_id, type(exc).__name__)
        err = to_api_error(exc)
        code, error = err.code or code, failure(err.message)
    finally:
        await source.aclose()
    status, ended = run.terminal(outcome)
    for event in await ending(run.p, run.items, status, run.usage(), error or ended, code):
        yield event
