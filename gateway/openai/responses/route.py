"""/v1/responses: create (whole, streamed, or in the background), retrieve, delete, input_items, cancel; compact
(compact.py) and input_tokens (the prompt's tokens as create would render the same body)."""
from __future__ import annotations

from typing import Any, AsyncGenerator, AsyncIterator, Awaitable, Literal

from fastapi import APIRouter, Query, Request, Response
from starlette.responses import Response as StarletteResponse

from conch.engine import GenerationDelta
from conch.gateway.conversation import ToolPlan, count_prompt_tokens
from conch.gateway.json_route import JSONBodyRoute
from conch.gateway.openai.responses import background, compact, mcp_run, stored
from conch.gateway.openai.responses.run import (Prepared, conversation, generation, numbered, prepare,
                                                run_events)
from conch.gateway.openai.responses.schemas import ResponsesRequest
from conch.gateway.records import caller
from conch.gateway.state import conch_state, wants_cache
from conch.gateway.streaming import prime, sse_named, sse_response, until_disconnect

router = APIRouter(route_class=JSONBodyRoute)


DROPPED_HEADER = "conch-hosted-tools-dropped"


@router.post("/v1/responses")
async def create_response(body: ResponsesRequest, request: Request, response: Response):
    p = await prepare(body, request)
    if p.tools.dropped:               # merged into a returned dict's response; set on a streamed one below
        response.headers[DROPPED_HEADER] = ", ".join(p.tools.dropped)
    return _with_headers(await _create(p, request), response)


def _with_headers(result: Any, response: Response) -> Any:
    if isinstance(result, StarletteResponse):
        result.headers.update({k: v for k, v in response.headers.items() if k == DROPPED_HEADER})
    return result


async def _create(p: Prepared, request: Request):
    body = p.body
    if p.mcp is not None:
        return await _with_mcp(p, request)
    gen, plan = await generation(p, request, wants_cache(request))
    deltas = conch_state(request).engine.generate(gen)
    if body.background:
        return await background.start(p, run_events(p, plan, deltas), request)
    if body.stream:                   # primed: an error before the first delta is a status, not an event
        return sse_response(_stream(p, run_events(p, plan, await prime(deltas))))
    # Primed under the disconnect watch: a client that hangs up while the request waits in the queue aborts it
    # there, and a refusal before the first delta (overload, a grammar the engine cannot serve) is a status,
    # not a stored `failed` response.
    return await until_disconnect(request, _whole(p, plan, deltas))


async def _whole(p: Prepared, plan: ToolPlan, deltas: AsyncGenerator[GenerationDelta, None]) -> dict[str, Any]:
    return await _last(run_events(p, plan, await prime(deltas)))


async def _with_mcp(p: Prepared, request: Request):
    """A response whose MCP loop runs here (gateway/openai/responses/mcp_run.py); primed, so a refusal or a bad
    request before the first output is a 4xx. A background one is not: it answers `queued` at once, and what
    goes wrong later is its failed response."""
    state = conch_state(request)
    run = mcp_run.McpRun(p, state.engine, state.settings.mcp.limits, getattr(request.app.state, "metrics", None),
                         wants_cache(request))
    if p.body.background:
        return await background.start(p, mcp_run.unprimed(run), request)
    events = mcp_run.primed(run)
    if p.body.stream:
        return sse_response(_stream(p, await events))
    return await until_disconnect(request, _primed_last(events))


async def _primed_last(events: Awaitable[AsyncIterator[dict[str, Any]]]) -> dict[str, Any]:
    return await _last(await events)


async def _last(events: AsyncIterator[dict[str, Any]]) -> dict[str, Any]:
    """The finished response: the terminal event's (a failure is a response with status failed)."""
    last: dict[str, Any] = {}
    async for event in events:
        last = event
    return last["response"]


async def _stream(p: Prepared, events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    async for event in numbered(p, events):
        yield sse_named(event["type"], event)


@router.post("/v1/responses/compact")
async def compact_response(body: ResponsesRequest, request: Request, response: Response):
    p = await prepare(body, request)
    if p.tools.dropped:
        response.headers[DROPPED_HEADER] = ", ".join(p.tools.dropped)
    return await compact.compact(p, request, wants_cache(request))


@router.post("/v1/responses/input_tokens")
async def input_tokens(body: ResponsesRequest, request: Request):
    p = await prepare(body, request)
    tokens = await count_prompt_tokens(conversation(p, False), conch_state(request).engine)
    return {"object": "response.input_tokens", "input_tokens": tokens}


@router.get("/v1/responses/{response_id}")
async def retrieve_response(response_id: str, request: Request):
    return (await stored.load(conch_state(request).records, response_id, caller(request)))["response"]


@router.delete("/v1/responses/{response_id}")
async def delete_response(response_id: str, request: Request):
    await stored.delete(conch_state(request).records, response_id, caller(request))
    return {"id": response_id, "object": "response.deleted", "deleted": True}


@router.get("/v1/responses/{response_id}/input_items")
async def list_input_items(response_id: str, request: Request, after: str | None = None,
                           limit: int = Query(20, ge=1, le=100), order: Literal["asc", "desc"] = "desc"):
    record = await stored.load(conch_state(request).records, response_id, caller(request))
    return stored.page(record["input_items"], after, limit, order)


@router.post("/v1/responses/{response_id}/cancel")
async def cancel_response(response_id: str, request: Request):
    return await background.cancel(request, response_id, caller(request))
