"""POST /v1/messages and /v1/messages/count_tokens: the body read into the shared Conversation
(gateway/anthropic/conversation.py), whose one path builds the engine request; the engine's text read back as
Anthropic's message (output.py) or stream (events.py). Keys, roles, rate limits and the response cache apply
as on chat completions: the same guard, the same engine request.

`context_management` edits (context_edits.py) change the messages before they are rendered; the session key
(Claude Code's X-Claude-Code-Session-Id, else metadata.user_id) routes a conversation's turns to one Ray
replica. A query string (Claude Code's `?beta=true`) changes nothing."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from conch.engine import GenerationRequest
from conch.gateway.aliases import resolve_model
from conch.gateway.anthropic import events
from conch.gateway.anthropic.betas import beta_headers
from conch.gateway.anthropic.context_edits import apply_edits, needs_prompt_count
from conch.gateway.anthropic.conversation import conversation
from conch.gateway.anthropic.errors import new_request_id
from conch.gateway.anthropic.output import message, message_id
from conch.gateway.anthropic.schemas import CountTokensRequest, MessagesRequest
from conch.gateway.conversation import Conversation, OutputReader, ToolPlan, build_generation, count_prompt_tokens
from conch.gateway.choices import collect
from conch.gateway.json_route import JSONBodyRoute
from conch.gateway.state import conch_state, wants_cache
from conch.gateway.streaming import sse_response, until_disconnect

router = APIRouter(route_class=JSONBodyRoute)

SESSION_HEADER = "x-claude-code-session-id"
# anthropic-version: Conch serves one version of this API. anthropic-beta: betas.py.
ACCEPTED_HEADERS = ("anthropic-version", "anthropic-beta", SESSION_HEADER)


async def _conversation(body: CountTokensRequest, request: Request) -> tuple[Conversation, list[dict[str, Any]]]:
    """The body's conversation, its context edits applied, and the edits' reports."""
    state = conch_state(request)
    model = resolve_model(request, body.model)

    def read(b: CountTokensRequest) -> Conversation:
        conv = conversation(b, model, use_cache=wants_cache(request),
                            keep_billing_header=state.settings.keep_billing_header)
        return replace(conv, session=_session(b, request))

    conv = read(body)
    applied: list[dict[str, Any]] = []
    if body.context_management is not None and body.context_management.edits:
        tokens = await count_prompt_tokens(conv, state.engine) if needs_prompt_count(body.context_management) else 0
        tokenizer = state.engine.get(model).tokenizer
        messages, applied = apply_edits(body.context_management, body.messages, tokens,
                                        lambda text: len(tokenizer.encode(text, add_special_tokens=False)))
        if applied:
            conv = read(body.model_copy(update={"messages": messages}))
    return conv, applied


def _session(body: CountTokensRequest, request: Request) -> str | None:
    metadata = getattr(body, "metadata", None)
    return request.headers.get(SESSION_HEADER) or (metadata.user_id if metadata is not None else None)


async def _build(body: CountTokensRequest, request: Request,
                 msg_id: str) -> tuple[GenerationRequest, ToolPlan, list[dict[str, Any]]]:
    conv, applied = await _conversation(body, request)
    state = conch_state(request)
    gen, plan = await build_generation(conv, state.engine, msg_id, state.settings.images)
    return gen, plan, applied


@router.post("/v1/messages")
async def create_message(body: MessagesRequest, request: Request):
    headers = {"request-id": new_request_id(), **beta_headers(request)}
    gen, plan, applied = await _build(body, request, message_id())
    managed = {"context_management": {"applied_edits": applied}} if body.context_management is not None else {}
    output = OutputReader.for_plan(plan)
    stops = body.stop_sequences or []
    omitted = body.thinking is not None and body.thinking.display in ("omitted", "updates")
    deltas = conch_state(request).engine.generate(gen)
    if body.stream:
        first = await events.first_delta(deltas)
        head = {"id": gen.id, "type": "message", "role": "assistant", "model": body.model, **managed}
        response = sse_response(events.message_stream(head, len(gen.prompt_token_ids or ()), first, deltas,
                                                      output, stops, omitted))
        response.headers.update(headers)
        return response
    # Not primed: a client that hangs up while the request still waits in the queue aborts it there.
    choices = await until_disconnect(request, collect(deltas, 1))
    return JSONResponse({**message(gen.id, body.model, choices[0], output, stops, omitted), **managed},
                        headers=headers)


@router.post("/v1/messages/count_tokens")
async def count_tokens(body: CountTokensRequest, request: Request):
    """The prompt's tokens as /v1/messages renders the same body (tools, template, the billing line's rule,
    context edits), which is what that request is billed: usage's input_tokens + cache_read_input_tokens. A
    prompt longer than the model's context is counted too (the count is how a client learns it must shrink)."""
    conv, _ = await _conversation(body, request)
    tokens = await count_prompt_tokens(conv, conch_state(request).engine)
    return JSONResponse({"input_tokens": tokens},
                        headers={"request-id": new_request_id(), **beta_headers(request)})
