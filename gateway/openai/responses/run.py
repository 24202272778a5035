"""One response's life: the request read into a Conversation over its stored head, the engine's deltas
through the OutputBuilder into events, and the finished response stored (with its context) and appended to
its conversation. Streamed, non-streamed and background responses all run `run_events`."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, AsyncGenerator, AsyncIterator

from fastapi import Request

from conch.engine import GenerationDelta, GenerationRequest
from conch.gateway.conversation import Conversation, OutputReader, ToolPlan, WirePaths, build_generation
from conch.gateway.conversation.constraint import format_fields
from conch.gateway.conversation.reasoning import Thinking
from conch.gateway.errors import APIError, public_reason, to_api_error
from conch.gateway.openai.responses import stored
from conch.gateway.openai.responses.events import ForcedCustomReader, OutputBuilder
from conch.gateway.openai.responses.items import read_input, to_messages
from conch.gateway.openai.responses.mcp_plan import McpPlan, plan_mcp
from conch.gateway.openai.responses.mcp_tools import public_tool
from conch.gateway.openai.responses.output import (echo, end_status, failure, new_response_id, response_object,
                                                   usage_dict)
from conch.gateway.openai.responses.schemas import ResponsesRequest
from conch.gateway.openai.responses.tools import ResponseTools, read_tools
from conch.gateway.records import RecordStore, caller
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
    owner: str
    store: RecordStore
    mcp: McpPlan | None = None               # the request's MCP servers, resolved (None: no mcp tools)

    def response(self, status: str, **fields: Any) -> dict[str, Any]:
        return response_object(self.response_id, self.settings, status, created_at=self.created_at, **fields)


async def prepare(body: ResponsesRequest, request: Request) -> Prepared:
    """Everything but the engine request: the wire read, the head loaded (404 for an unknown id)."""
    tools = read_tools(body.tools, body.tool_choice)
    input_items = read_input(body.input)
    owner, _ = caller(request)
    store = conch_state(request).records
    head = await stored.load_head(store, owner, body.previous_response_id, body.conversation_id)
    context = head + input_items
    mcp = await plan_mcp(tools, context, len(head), conch_state(request).settings.mcp, owner or None) \
        if tools.mcp else None
    settings = echo(body, [public_tool(t) for t in body.tools or ()])
    return Prepared(body, new_response_id(), int(time.time()), settings, tools, input_items, context, owner, store,
                    mcp)


@dataclass(frozen=True)
class TurnExtras:
    """What one model turn of an MCP loop adds to the request's conversation: the MCP tools offered now (chat's
    function shapes), the loop's calls so far (chat messages), and the turn's tool_choice."""

    tools: tuple[dict[str, Any], ...] = ()
    messages: tuple[dict[str, Any], ...] = ()
    tool_choice: str | dict[str, Any] | None = None


def conversation(p: Prepared, use_cache: bool, extras: TurnExtras | None = None) -> Conversation:
    body = p.body
    messages = to_messages(p.context, len(p.context) - len(p.input_items)) + list(extras.messages if extras else ())
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
        model=body.model, messages=tuple(messages), sampling=body.sampling,
        tools=p.tools.tools + (extras.tools if extras else ()), tool_choice=choice,
        parallel_tool_calls=_parallel(body),
        constraints=tuple(constraints) + p.tools.constraints, response_format=chat_format,
        stream=bool(body.stream), use_cache=use_cache, paths=PATHS,
        thinking=Thinking.from_effort(body.effort, body.max_output_tokens))


def _forces_calls(tools: ResponseTools, choice: str | dict[str, Any] | None) -> bool:
    return tools.forced_custom is not None or choice == "required" or isinstance(choice, dict)


def _chat_format(fmt: dict[str, Any]) -> dict[str, Any]:
    """text.format ({"type": "json_schema", "name", "schema", "strict"}) in chat's response_format shape."""
    if fmt.get("type") != "json_schema":
        return fmt
    return {"type": "json_schema", "json_schema": {k: v for k, v in fmt.items() if k != "type"}}


def _parallel(body: ResponsesRequest) -> bool | None:
    return False if body.max_tool_calls == 1 else body.parallel_tool_calls


async def generation(p: Prepared, request: Request, use_cache: bool) -> tuple[GenerationRequest, ToolPlan]:
    return await build_generation(conversation(p, use_cache), conch_state(request).engine, p.response_id)


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
    except Exception as exc:                    # mid-run failure (the client going away is not an Exception)
        log.warning("response %s failed: %s", p.response_id, exc)
        err = to_api_error(exc)
        code, error = err.code or code, failure(err.message)
    status, incomplete = end_status(out.status)
    for event in await ending(p, out.items, (status, incomplete), usage_dict(out.choice), error, code):
        yield event


_TERMINAL = {"completed": "completed", "incomplete": "incomplete"}


async def ending(p: Prepared, items: list[dict[str, Any]], status: tuple[str, dict[str, str] | None],
                 usage: dict[str, Any], error: dict[str, str] | None, code: str = "server_error") -> list[dict]:
    """The last events: an `error` event for a failure, then the terminal one with the finished response,
    stored first."""
    state, incomplete = ("failed", None) if error is not None else status
    final = p.response(state, output=items, usage=usage, incomplete=incomplete, error=error)
    await finish_records(p, final)
    head = [{"type": "error", "code": code, "message": error["message"], "param": None}] if error else []
    return head + [{"type": f"response.{_TERMINAL.get(final['status'], 'failed')}", "response": final}]


async def finish_records(p: Prepared, final: dict[str, Any]) -> None:
    """The finished response stored (store: true), and its input and output appended to its conversation."""
    if p.body.stored:
        await stored.save(p.store, p.owner, final, p.input_items, p.context)
    if p.body.conversation_id is not None:
        await stored.append_to_conversation(p.store, p.owner, p.body.conversation_id,
                                            p.input_items + final["output"])
