"""`background: true`: a response that runs detached as an asyncio task of this process, stored as it goes
(queued, in_progress, then its end) and polled with GET. A response with MCP tools runs its whole loop in the
task, and is stored again, with its output so far, each time an MCP item starts or ends (a GET shows the call
that runs); the request's MCP headers live in the task's memory only (the stored echo leaves them out). Cancel
cancels the task (the engine request, or the MCP call in flight, is cancelled with it) and stores the response
as cancelled. The runs live on the app (one table per app, not a
module global); a response queued on another replica is marked cancelled in the store, where its own replica
sees it when it stores its end (the last write wins). Whoever cancels, the record keeps its owner."""
from __future__ import annotations

import asyncio
import logging
from contextlib import aclosing
from typing import Any, AsyncGenerator

from fastapi import Request

from conch.gateway.errors import APIError
from conch.gateway.openai.responses import stored
from conch.gateway.openai.responses.run import Prepared
from conch.gateway.records import Caller
from conch.gateway.state import conch_state

log = logging.getLogger(__name__)

_PENDING = ("queued", "in_progress")
_ITEM_EVENTS = ("response.output_item.added", "response.output_item.done")


def _runs(request: Request) -> dict[str, asyncio.Task]:
    runs = getattr(request.app.state, "background_responses", None)
    if runs is None:
        runs = request.app.state.background_responses = {}
    return runs


async def start(p: Prepared, events: AsyncGenerator[dict[str, Any], None], request: Request) -> dict[str, Any]:
    """The queued response, stored before the task starts (so a GET right after finds it). `events` is the
    response's run, not started yet (run_events or the MCP run): its terminal event stores the end."""
    queued = p.response("queued")
    await stored.save(p.store, p.owner, queued, p.input_items, p.context)
    runs = _runs(request)
    task = asyncio.create_task(_run(p, events))
    runs[p.response_id] = task
    task.add_done_callback(lambda _: runs.pop(p.response_id, None))
    return queued


async def _run(p: Prepared, events: AsyncGenerator[dict[str, Any], None]) -> None:
    try:
        await stored.save(p.store, p.owner, p.response("in_progress"), p.input_items, p.context)
        output: dict[int, dict[str, Any]] = {}              # output_index -> the item as its last event showed it
        async with aclosing(events):
            async for event in events:
                if event["type"] not in _ITEM_EVENTS:
                    continue
                output[event["output_index"]] = event["item"]
                if event["item"]["type"].startswith("mcp_"):
                    await stored.save(p.store, p.owner, p.response("in_progress", output=list(output.values())),
                                      p.input_items, p.context)
    except asyncio.CancelledError:
        await asyncio.shield(stored.save(p.store, p.owner, p.response("cancelled"), p.input_items, p.context))
        raise
    except Exception:                       # run_events stores failures itself; this is the store failing
        log.exception("background response %s could not be stored", p.response_id)


async def cancel(request: Request, response_id: str, who: Caller) -> dict[str, Any]:
    """The response after cancelling it: 400 if it was not a background response; a finished one is left
    as it ended (OpenAI's rule: cancelling is idempotent). The record keeps its owner whoever cancels."""
    store = conch_state(request).records
    record = await stored.load(store, response_id, who)
    if not record["response"].get("background"):
        raise APIError(400, "only a background response can be cancelled", param="response_id")
    task = _runs(request).get(response_id)
    if task is not None:
        task.cancel()
        await asyncio.wait([task])
        return (await stored.load(store, response_id, who))["response"]
    if record["response"]["status"] in _PENDING:
        record = await stored.mark_cancelled(store, response_id, who, _PENDING)
    return record["response"]
