"""POST /v1/chat/completions: the body read into a Conversation (gateway/conversation), whose one path builds
the engine request and reads its output back."""
from __future__ import annotations

from dataclasses import replace
from typing import AsyncIterator

from fastapi import APIRouter, Request

from conch.engine import GenerationDelta, GenerationRequest
from conch.gateway.aliases import resolve_model
from conch.gateway.conversation import Conversation, OutputReader, ToolPlan, build_generation
from conch.gateway.conversation.reasoning import Thinking
from conch.gateway.errors import APIError
from conch.gateway.openai.chat_output import call_dict, delta_dict
from conch.gateway.choices import Choice, collect
from conch.gateway.openai.choices import chat_logprobs, new_id, now, usage
from conch.gateway.json_route import JSONBodyRoute
from conch.gateway.openai.schemas.chat import ChatCompletionRequest, NamedToolChoice
from conch.gateway.openai.structured import constraint_fields
from conch.gateway.state import conch_state, wants_cache
from conch.gateway.streaming import error_event, prime, sse_event, sse_response, until_disconnect

router = APIRouter(route_class=JSONBodyRoute)


def conversation(body: ChatCompletionRequest, use_cache: bool) -> Conversation:
    """The body as the shared path's conversation (its tool messages checked first: chat's own wire rule)."""
    _check_tool_messages(body)
    return Conversation(
        model=body.model, messages=tuple(m.model_dump(exclude_none=True) for m in body.messages),
        sampling=body.sampling, tools=tuple(t.model_dump(exclude_none=True) for t in body.tools or ()),
        tool_choice=(body.tool_choice.model_dump() if isinstance(body.tool_choice, NamedToolChoice)
                     else body.tool_choice),
        parallel_tool_calls=body.parallel_tool_calls, constraints=tuple(constraint_fields(body)),
        response_format=body.response_format, stream=body.stream, use_cache=use_cache,
        add_generation_prompt=body.add_generation_prompt, continue_final_message=body.continue_final_message,
        thinking=_thinking(body))


def _thinking(body: ChatCompletionRequest) -> Thinking:
    """reasoning_effort, with vLLM's thinking_token_budget overriding the effort's budget."""
    thinking = Thinking.from_effort(body.reasoning_effort, body.max_completion_tokens or body.max_tokens)
    if body.thinking_token_budget is None:
        return thinking
    if thinking.enabled is False:
        raise APIError(400, f"thinking_token_budget cannot be combined with reasoning_effort "
                            f"'{body.reasoning_effort}', which turns thinking off", param="thinking_token_budget")
    return replace(thinking, enabled=True, budget=body.thinking_token_budget)


def _check_tool_messages(body: ChatCompletionRequest) -> None:
    seen: set[str] = set()
    for i, message in enumerate(body.messages):
        for call in message.tool_calls or ():
            seen.add(call.id)
        if message.role == "tool":
            if not message.tool_call_id:
                raise APIError(400, f"messages[{i}]: a tool message needs tool_call_id",
                               param=f"messages.{i}.tool_call_id")
            if message.tool_call_id not in seen:
                raise APIError(400, f"messages[{i}]: tool_call_id '{message.tool_call_id}' matches no earlier "
                               "assistant tool call", param=f"messages.{i}.tool_call_id")


async def build_request(body: ChatCompletionRequest, request: Request) -> tuple[GenerationRequest, ToolPlan]:
    conv = replace(conversation(body, wants_cache(request, body.cache)), model=resolve_model(request, body.model))
    state = conch_state(request)
    return await build_generation(conv, state.engine, new_id("chatcmpl"), state.settings.images)


@router.post("/v1/chat/completions")
async def create_chat_completion(body: ChatCompletionRequest, request: Request):
    gen, plan = await build_request(body, request)
    outputs = [OutputReader.for_plan(plan) for _ in range(body.n)]
    deltas = conch_state(request).engine.generate(gen)
    if body.stream:                         # primed: an error before the first delta is a status, not an event
        return sse_response(_stream(gen, body, await prime(deltas), outputs))
    # Not primed: a client that hangs up while the request still waits in the queue aborts it there.
    choices = await until_disconnect(request, collect(deltas, body.n))
    return {
        "id": gen.id, "object": "chat.completion", "created": now(), "model": body.model,
        "choices": [_choice(c, body.logprobs, outputs[c.index]) for c in choices], "usage": usage(choices),
    }


def _choice(c: Choice, logprobs: bool, output: OutputReader) -> dict:
    parsed = output.whole(c.content)
    message: dict = {"role": "assistant", "content": parsed.content}
    if output.reasoning:
        message["reasoning_content"] = output.reasoning
    if parsed.tool_calls:
        message["tool_calls"] = [call_dict(call) for call in parsed.tool_calls]
    return {
        "index": c.index, "message": message,
        "logprobs": chat_logprobs(c.logprobs) if logprobs else None,
        "finish_reason": output.finish_reason(c.status),
    }


async def _stream(gen: GenerationRequest, body: ChatCompletionRequest, deltas: AsyncIterator[GenerationDelta],
                  outputs: list[OutputReader]) -> AsyncIterator[str]:
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
                yield error_event(d.error)
                return
            output = outputs[d.index]
            parts = [delta_dict(e) for e in output.feed(d.text) + (output.finish() if d.finished else [])]
            logprobs = chat_logprobs(list(d.logprobs)) if body.logprobs and d.logprobs else None
            if logprobs and not parts:
                parts = [{"content": ""}]
            for k, part in enumerate(parts):
                yield chunk(d.index, part, logprobs=logprobs if k == 0 else None)
            if d.finished:
                yield chunk(d.index, {}, output.finish_reason(d.status))
    except Exception as exc:  # mid-stream failure: an error event, then the stream closes
        yield error_event(exc)
        return
    if with_usage:
        yield sse_event({**base, "choices": [], "usage": usage(choices)})
    yield sse_event("[DONE]")
