"""POST /v1/messages and /v1/messages/count_tokens: the body read into the shared Conversation
(gateway/anthropic/conversation.py), whose one path builds the engine request; the engine's text read back as
Anthropic's message (output.py) or stream (events.py). Keys, roles, rate limits and the response cache apply
as on chat completions: the same guard, the same engine request."""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from conch.engine import GenerationRequest
from conch.gateway.aliases import resolve_model
from conch.gateway.anthropic import events
from conch.gateway.anthropic.conversation import conversation
from conch.gateway.anthropic.errors import new_request_id
from conch.gateway.anthropic.output import message, message_id
from conch.gateway.anthropic.schemas import CountTokensRequest, MessagesRequest
from conch.gateway.conversation import OutputReader, ToolPlan, build_generation
from conch.gateway.openai.choices import collect
from conch.gateway.openai.json_route import JSONBodyRoute
from conch.gateway.state import conch_state, wants_cache
from conch.gateway.streaming import sse_response, until_disconnect

router = APIRouter(route_class=JSONBodyRoute)

# Accepted and not acted on: Conch serves one version of this API, and no beta changes what it does.
ACCEPTED_HEADERS = ("anthropic-version", "anthropic-beta")


async def _build(body: CountTokensRequest, request: Request, msg_id: str) -> tuple[GenerationRequest, ToolPlan]:
    state = conch_state(request)
    conv = conversation(body, resolve_model(request, body.model), use_cache=wants_cache(request),
                        keep_billing_header=state.settings.keep_billing_header)
    return await build_generation(conv, state.engine, msg_id)


@router.post("/v1/messages")
async def create_message(body: MessagesRequest, request: Request):
    headers = {"request-id": new_request_id()}
    gen, plan = await _build(body, request, message_id())
    output = OutputReader.for_plan(plan)
    stops = body.stop_sequences or []
    omitted = body.thinking is not None and body.thinking.display == "omitted"
    deltas = conch_state(request).engine.generate(gen)
    if body.stream:
        first = await events.first_delta(deltas)
        head = {"id": gen.id, "type": "message", "role": "assistant", "model": body.model}
        response = sse_response(events.message_stream(head, len(gen.prompt_token_ids or ()), first, deltas,
                                                      output, stops, omitted))
        response.headers.update(headers)
        return response
    # Not primed: a client that hangs up while the request still waits in the queue aborts it there.
    choices = await until_disconnect(request, collect(deltas, 1))
    return JSONResponse(message(gen.id, body.model, choices[0], output, stops, omitted), headers=headers)


@router.post("/v1/messages/count_tokens")
async def count_tokens(body: CountTokensRequest, request: Request):
    """The prompt's tokens as /v1/messages renders the same body (tools, template, the billing line's rule),
    which is what that request is billed: usage's input_tokens + cache_read_input_tokens."""
    gen, _ = await _build(body, request, message_id())
    return JSONResponse({"input_tokens": len(gen.prompt_token_ids or ())},
                        headers={"request-id": new_request_id()})
