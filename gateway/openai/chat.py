"""POST /v1/chat/completions."""
from __future__ import annotations

from typing import AsyncIterator

from fastapi import APIRouter, Request

from agents import render_chat
from engine.types import GenerationDelta, GenerationRequest
from gateway.errors import APIError, openai_body, to_api_error
from gateway.openai.choices import Choice, chat_logprobs, new_id, now, usage
from gateway.openai.schemas.chat import ChatCompletionRequest
from gateway.state import conch_state
from gateway.streaming import prime, sse_event, sse_response, until_disconnect

router = APIRouter()

_NOT_YET = ("tools", "tool_choice", "parallel_tool_calls", "response_format", "structured_outputs",
            "guided_json", "guided_regex", "guided_choice", "guided_grammar")


def _reject_unsupported(body: ChatCompletionRequest) -> None:
    for name in _NOT_YET:
        if getattr(body, name) is not None:
            raise APIError(400, f"'{name}' is not supported by this server yet", param=name,
                           code="unsupported_parameter")


def build_request(body: ChatCompletionRequest, request: Request) -> GenerationRequest:
    conch = conch_state(request)
    model = conch.engine.get(body.model)
    _reject_unsupported(body)
    prompt = render_chat(model.tokenizer, [m.to_template() for m in body.messages],
                         add_generation_prompt=body.add_generation_prompt,
                         continue_final_message=body.continue_final_message)
    params = body.sampling_params(body.max_new_tokens, body.num_logprobs, len(model.tokenizer))
    gen = GenerationRequest(id=new_id("chatcmpl"), model=body.model, prompt=prompt, params=params,
                            stream=body.stream, add_special_tokens=False,
                            use_cache=body.cache and "no-cache" not in request.headers.get("cache-control", ""))
    return conch.engine.prepare(gen, prompt_param="messages")


@router.post("/v1/chat/completions")
async def create_chat_completion(body: ChatCompletionRequest, request: Request):
    gen = build_request(body, request)
    deltas = await prime(conch_state(request).engine.generate(gen))
    if body.stream:
        return sse_response(_stream(gen, body, deltas))
    choices = await until_disconnect(request, _collect(deltas, body.n))
    return {
        "id": gen.id, "object": "chat.completion", "created": now(), "model": body.model,
        "choices": [_choice(c, body.logprobs) for c in choices], "usage": usage(choices),
    }


async def _collect(deltas: AsyncIterator[GenerationDelta], n: int) -> list[Choice]:
    choices = [Choice(i) for i in range(n)]
    async for delta in deltas:
        choices[delta.index].add(delta)
    for choice in choices:
        if choice.error:
            raise APIError(500, choice.error, type="internal_error")
    return choices


def _choice(c: Choice, logprobs: bool) -> dict:
    return {
        "index": c.index,
        "message": {"role": "assistant", "content": c.content},
        "logprobs": chat_logprobs(c.logprobs) if logprobs else None,
        "finish_reason": c.finish_reason,
    }


async def _stream(gen: GenerationRequest, body: ChatCompletionRequest,
                  deltas: AsyncIterator[GenerationDelta]) -> AsyncIterator[str]:
    base = {"id": gen.id, "object": "chat.completion.chunk", "created": now(), "model": body.model}
    with_usage = body.include_usage

    def chunk(index: int, delta: dict, finish: str | None = None, logprobs=None) -> str:
        out = {**base, "choices": [{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]}
        if with_usage:
            out["usage"] = None
        return sse_event(out)

    choices = [Choice(i) for i in range(body.n)]
    for i in range(body.n):
        yield chunk(i, {"role": "assistant", "content": ""})
    try:
        async for d in deltas:
            choices[d.index].add(d)
            if d.error:
                yield sse_event(openai_body(APIError(500, d.error, type="internal_error")))
                return
            if d.text or (body.logprobs and d.logprobs):
                yield chunk(d.index, {"content": d.text}, logprobs=chat_logprobs(list(d.logprobs)) if body.logprobs else None)
            if d.finished:
                yield chunk(d.index, {}, d.finish_reason)
    except Exception as exc:  # mid-stream failure: an error event, then the stream closes
        yield sse_event(openai_body(to_api_error(exc)))
        return
    if with_usage:
        yield sse_event({**base, "choices": [], "usage": usage(choices)})
    yield sse_event("[DONE]")
