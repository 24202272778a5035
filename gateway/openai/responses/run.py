"""One response's life: the request read into a Conversation over its stored head, the engine's deltas
through the OutputBuilder into events, and the finished response stored (with its context) and appended to
its conversation. Streamed, non-streamed and background responses all run `run_events`."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, AsyncGenerator, AsyncIterator

from starlette.requests import HTTPConnection

from conch.engine import GenerationDelta, GenerationRequest
from conch.gateway.aliases import resolve_model
from conch.gateway.conversation import Conversation, OutputReader, ToolPlan, WirePaths, build_generation
from conch.gateway.conversation.constraint import format_fields
from conch.gateway.conversation.reasoning import Thinking
from conch.gateway.errors import APIError, public_reason, to_api_error
from conch.gateway.openai.responses import stored
from conch.gateway.openai.responses.events import ForcedCustomReader, OutputBuilder
from conch.gateway.openai.responses.items import read_input, to_messages
from conch.gateway.openai.responses.mcp_plan import McpPlan, plan_mcp
from conch.gateway.openai.responses.output import (echo, end_status, failure, new_response_id, response_object,
                                                   usage_dict)
from conch.gateway.openai.responses.schemas import ResponsesRequest
from conch.gateway.openai.responses.tools import ResponseTools, echo_tool, read_tools
from conch.gateway.records import (Caller, RecordNotFound, RecordStore, RecordTooLarge, StoreUnavailable,
                                   caller)
from conch.gateway.state import conch_state

log = logging.getLogger(__name__)

PATHS = WirePaths(tool_schema="tools.{index}.parameters", tools="tools", tool_choice="tool_choice",
                  messages="input", output_format="text.format")


@dataclass(frozen=True)
class Prepared:
    body: ResponsesRequest
    response_id: str
    created_at: int
    settings: dict[str, Any]                 # the request's settings as the response echoes them
    tools: ResponseTools
    input_items: list[dict[str, Any]]        # this request's, normalized
    context: list[dict[str, Any]]            # the head it continues, then its input
    who: Caller                              # the request's key: owns the response, reads its head
    store: RecordStore
    mcp: McpPlan | None = None               # the request's MCP servers, resolved (None: no mcp tools)
    served: str = ""                         # the served model body.model names (its alias resolved)

    @property
    def owner(self) -> str:
        return self.who.name

    def response(self, status: str, **fields: Any) -> dict[str, Any]:
        return response_object(self.response_id, self.settings, status, created_at=self.created_at, **fields)


async def prepare(body: ResponsesRequest, request: HTTPConnection,
                  local: Mapping[str, list[dict[str, Any]]] | None = None) -> Prepared:
    """Everything but the engine request: the wire read (hosted tools dropped or refused by the server's
    policy; a drop logged), the head loaded (400 previous_response_not_found for an unknown id). `local`: heads
    a WebSocket keeps in memory by response id (its unstored responses), read before the store."""
    tools = read_tools(body.tool_list, body.choice, conch_state(request).settings.hosted_tools)
    if tools.dropped:
        log.warning("response for %s: hosted tools %s dropped (--hosted-tools drop): Conch cannot run them",
                    body.model, list(tools.dropped))
    input_items = read_input(body.input_items)
    who = caller(request)
    store = conch_state(request).records
    kept = (local or {}).get(body.previous_response_id or "")
    head = kept if kept is not None else \
        await stored.load_head(store, who, body.previous_response_id, body.conversation_id)
    context = head + input_items
    mcp = await plan_mcp(tools, context, len(head), conch_state(request).settings.mcp, who.name or None) \
        if tools.mcp else None
    settings = echo(body, [echo_tool(t) for t in body.tool_list or ()])
    return Prepared(body, new_response_id(), int(time.time()), settings, tools, input_items, context, who, store,
                    mcp, resolve_model(request, body.model))


@dataclass(frozen=True)
class TurnExtras:
    """What one model turn of an MCP loop adds to the request's conversation: the MCP tools offered now (chat's
    function shapes), the loop's calls so far (chat messages), and the turn's tool_choice."""

    tools: tuple[dict[str, Any], ...] = ()
    messages: tuple[dict[str, Any], ...] = ()
    tool_choice: str | dict[str, Any] | None = None


def conversation(p: Prepared, use_cache: bool, extras: TurnExtras | None = None) -> Conversation:
    body = p.body
    images: list[str] = []
    messages = to_messages(p.context, len(p.context) - len(p.input_items), images) + \
        list(extras.messages if extras else ())
    if body.instructions:
        messages.insert(0, {"role": "developer", "content": body.instructions})
    if not messages:
        raise APIError(400, "input is empty: give at least one item (or previous_response_id / conversation)",
                       param="input")
    fmt = body.output_format
    chat_format = _chat_format(fmt) if fmt is not None else None
    constraints = format_fields(chat_format, "text.format") if chat_format is not None else []
    choice = extras.tool_choice if extras is not None else p.tools.tool_choice
    if _forces_calls(p.tools, choice):   # text.format shapes text, which an output of forced calls never holds
        constraints = []
    return Conversation(
        model=p.served or body.model, messages=tuple(messages), sampling=body.sampling,
        tools=p.tools.tools + (extras.tools if extras else ()), tool_choice=choice,
        parallel_tool_calls=_parallel(body),
        constraints=tuple(constraints) + p.tools.constraints, response_format=chat_format,
        stream=bool(body.stream), use_cache=use_cache, paths=PATHS, session=body.prompt_cache_key,
        thinking=Thinking.from_effort(body.effort, body.max_output_tokens), image_paths=tuple(images))


def _forces_calls(tools: ResponseTools, choice: str | dict[str, Any] | None) -> bool:
    return tools.forced_custom is not None or choice == "required" or isinstance(choice, dict)


def _chat_format(fmt: dict[str, Any]) -> dict[str, Any]:
    """text.format ({"type": "json_schema", "name", "schema", "strict"}) in chat's response_format shape."""
    if fmt.get("type") != "json_schema":
        return fmt
    return {"type": "json_schema", "json_schema": {k: v for k, v in fmt.items() if k != "type"}}


def _parallel(body: ResponsesRequest) -> bool | None:
    return False if body.max_tool_calls == 1 else body.parallel_tool_calls


async def generation(p: Prepared, request: HTTPConnection, use_cache: bool) -> tuple[GenerationRequest, ToolPlan]:
    state = conch_state(request)
    return await build_generation(conversation(p, use_cache), state.engine, p.response_id, state.settings.images)


def builder(p: Prepared, plan: ToolPlan, items: list[dict[str, Any]] | None = None,
            held: frozenset[str] = frozenset()) -> OutputBuilder:
    reader = ForcedCustomReader() if p.tools.forced_custom is not None else OutputReader.for_plan(plan)
    return OutputBuilder(reader, p.tools, p.body.wants_logprobs, p.body.max_tool_calls, items, held,
                         summary=p.body.summary_mode is not None, encrypted=p.body.wants_encrypted_reasoning)


async def run_events(p: Prepared, plan: ToolPlan,
                     deltas: AsyncIterator[GenerationDelta]) -> AsyncGenerator[dict[str, Any], None]:
    """The output's events, then the terminal one (response.completed / .incomplete / .failed, after an
    `error` event for a failure), whose `response` is the finished response, already stored."""
    out = builder(p, plan)
    error: dict[str, str] | None = None
    code = "server_error"                       # the error event's code; the response's error is a server_error
    try:
        async for delta in deltas:
            for event in out.feed(delta):
                yield event
            if delta.error:
                error = failure(public_reason(delta.error))
        for event in out.finish():
            yield event
    except (asyncio.CancelledError, GeneratorExit):
        await client_left(p, out.abandon(), usage_dict(out.choice))
        raise
    except Exception as exc:                    # mid-run failure (the client going away is not an Exception)
        log.warning("response %s failed: %s", p.response_id, exc)
        err = to_api_error(exc)
        code, error = err.code or code, failure(err.message)
    status, incomplete = end_status(out.status)
    for event in await ending(p, out.items, (status, incomplete), usage_dict(out.choice), error, code):
        yield event


async def numbered(p: Prepared, events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    """A streamed response's events as a client reads them (SSE or a WebSocket): response.created and
    .in_progress, the output's events, then the terminal one; sequence_number counts every event from 0."""
    head = p.response("in_progress")
    sequence = 0
    for kind in ("response.created", "response.in_progress"):
        yield {"type": kind, "response": head, "sequence_number": sequence}
        sequence += 1
    async for event in events:
        yield {**event, "sequence_number": sequence}
        sequence += 1


_TERMINAL = {"completed": "completed", "incomplete": "incomplete"}
_LEAVING: set[asyncio.Task] = set()              # the records of streams whose client left, being written
LEFT = {"reason": "client_disconnected"}         # incomplete_details of a streamed response its client left


async def client_left(p: Prepared, items: list[dict[str, Any]], usage: dict[str, Any]) -> None:
    """A streamed response whose client left (its id was announced: it must not 404 now): stored `incomplete`
    with its output so far (and appended to its conversation), in a task of its own, so that the cancellation
    that ends the stream does not stop it. A background response stores its own end (cancelled)."""
    if not p.body.stream or p.body.background:
        return
    final = p.response("incomplete", output=items, usage=usage, incomplete=LEFT)
    task = asyncio.ensure_future(finish_records(p, final))
    _LEAVING.add(task)
    task.add_done_callback(_left_written)
    with contextlib.suppress(BaseException):            # cancelled again (anyio): the task goes on
        await asyncio.shield(task)


def _left_written(task: asyncio.Task) -> None:
    _LEAVING.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.warning("a response its client left could not be stored: %s", task.exception())


async def ending(p: Prepared, items: list[dict[str, Any]], status: tuple[str, dict[str, str] | None],
                 usage: dict[str, Any], error: dict[str, str] | None, code: str = "server_error") -> list[dict]:
    """The last events: an `error` event for a failure, then the terminal one with the finished response,
    stored first."""
    state, incomplete = ("failed", None) if error is not None else status
    final = p.response(state, output=items, usage=usage, incomplete=incomplete, error=error)
    try:
        final = await finish_records(p, final)
    except (RecordTooLarge, StoreUnavailable) as exc:    # a whole response answers 507 / 503; a stream ends failed
        if not p.body.stream:
            raise
        final = p.response("failed", output=items, usage=usage, error=failure(exc.message))
        code = to_api_error(exc).code or code
    error = final.get("error")
    head = [{"type": "error", "code": code, "message": error["message"], "param": None}] if error else []
    return head + [{"type": f"response.{_TERMINAL.get(final['status'], 'failed')}", "response": final}]


async def finish_records(p: Prepared, final: dict[str, Any]) -> dict[str, Any]:
    """The finished response stored (store: true), and its input and output appended to its conversation.
    Returns the response as stored: failed, if its conversation was deleted while it ran."""
    if p.body.stored:
        await stored.save(p.store, p.owner, final, p.input_items, p.context)
    if p.body.conversation_id is None:
        return final
    try:
        await stored.append_to_conversation(p.store, p.who, p.body.conversation_id,
                                            p.input_items + final["output"])
    except RecordNotFound:
        final = {**final, "status": "failed", "incomplete_details": None, "error": failure(
            f"The conversation '{p.body.conversation_id}' was deleted while this response ran; its input and "
            "output were not added to it.")}
        if p.body.stored:
            await stored.save(p.store, p.owner, final, p.input_items, p.context)
    return final
