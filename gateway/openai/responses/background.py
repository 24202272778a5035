"""`background: true`: a response that runs detached as an asyncio task of this process, stored as it goes
(queued, in_progress, then its end) and polled with GET. Cancel cancels the task (the engine request is
aborted with it) and stores the response as cancelled. The runs live on the app (one table per app, not a
module global); a response queued on another replica is marked cancelled in the store, where its own replica
sees it when it stores its end (the last write wins)."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import Request

from engine import GenerationRequest
from gateway.conversation import ToolPlan
from gateway.errors import APIError
from gateway.openai.responses import stored
from gateway.openai.responses.run import Prepared, run_events
from gateway.state import conch_state

log = logging.getLogger(__name__)

_PENDING = ("queued", "in_progress")


def _runs(request: Request) -> dict[str, asyncio.Task]:
    runs = getattr(request.app.state, "background_responses", None)
    if runs is None:
        runs = request.app.state.background_responses = {}
    return runs


async def start(p: Prepared, plan: ToolPlan, gen: GenerationRequest, request: Request) -> dict[str, Any]:
    """The queued response, stored before the task starts (so a GET right after finds it)."""
    queued = p.response("queued")
    await stored.save(p.store, p.owner, queued, p.input_items, p.context)
    runs = _runs(request)
    task = asyncio.create_task(_run(p, plan, gen, conch_state(request).engine))
    runs[p.response_id] = task
    task.add_done_callback(lambda _: runs.pop(p.response_id, None))
    return queued


async def _run(p: Prepared, plan: ToolPlan, gen: GenerationRequest, engine) -> None:
    try:
        await stored.save(p.store, p.owner, p.response("in_progress"), p.input_items, p.context)
        async for _ in run_events(p, plan, engine.generate(gen)):     # the last event stores the end
            pass
    except asyncio.CancelledError:
        await asyncio.shield(stored.save(p.store, p.owner, p.response("cancelled"), p.input_items, p.context))
        raise
    except Exception:                       # run_events stores failures itself; this is the store failing
        log.exception("background response %s could not be stored", p.response_id)


async def cancel(request: Request, response_id: str, owner: str, admin: bool) -> dict[str, Any]:
    """The response after cancelling it: 400 if it was not a background response; a finished one is left
    as it ended (OpenAI's rule: cancelling is idempotent)."""
    record = await stored.load(conch_state(request).records, response_id, owner, admin)
    if not record["response"].get("background"):
        raise APIError(400, "only a background response can be cancelled", param="response_id")
    task = _runs(request).get(response_id)
    if task is not None:
        task.cancel()
        await asyncio.wait([task])
        record = await stored.load(conch_state(request).records, response_id, owner, admin)
    elif record["response"]["status"] in _PENDING:
        record["response"]["status"] = "cancelled"
        await stored.save(conch_state(request).records, owner, record["response"], record["input_items"],
                          record["context"])
    return record["response"]
