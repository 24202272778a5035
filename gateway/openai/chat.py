"""POST /v1/chat/completions."""
from __future__ import annotations

import asyncio
from typing import AsyncIterator

from fastapi import APIRouter, Request

from agents import render_chat
from agents.tool_formats.prompt import template_accepts_tools, tool_dicts
from engine import ChatInput, GenerationDelta, GenerationRequest
from grammars import GrammarSpec
from gateway.errors import APIError
from gateway.openai.chat_output import ChatOutput
from gateway.openai.choices import Choice, collect, chat_logprobs, new_id, now, usage
from gateway.openai.json_route import JSONBodyRoute
from gateway.openai.schemas.chat import ChatCompletionRequest
from gateway.openai.structured import output_constraint
from gateway.openai.tools import ToolPlan, plan_tools
from gateway.openai.upstream import chat_input
from gateway.state import conch_state
from gateway.streaming import error_event, prime, sse_event, sse_response, until_disconnect

router = APIRouter(route_class=JSONBodyRoute)


def _prompt(body: ChatCompletionRequest, tokenizer, plan: ToolPlan) -> str:
    messages = [m.to_template() for m in body.messages]
    tools = None
    if plan.tools and template_accepts_tools(tokenizer):
        tools = tool_dicts(plan.tools)
    elif plan.format is not None:  # tools, or tool turns, for a template that knows none
        messages = plan.format.prompt(messages, plan.tools)
    return render_chat(tokenizer, messages, tools=tools, add_generation_prompt=body.add_generation_prompt,
                       continue_final_message=body.continue_final_message)


def _grammar(body: ChatCompletionRequest, plan: ToolPlan) -> GrammarSpec | None:
    constraint = output_constraint(body)
    if constraint is None:
        return plan.grammar
    if plan.grammar is not None:
        raise APIError(400, f"{constraint.param} cannot be combined with tool_choice '{plan.choice.mode}'",
                       param=constraint.param)
    return constraint.spec


def _inputs(body: ChatCompletionRequest, model) -> tuple[ToolPlan, ChatInput | None, str | None, GrammarSpec | None]:
    """The tool plan (each tool's schema checked), and either the messages for a backend that renders its own
    (an upstream) or the rendered prompt and its grammar. A worker thread's work: 20 tools' checks cost ~4 ms,
    a long conversation's template more."""
    plan = plan_tools(body, model.config.tool_call_parser, model.config.max_parallel_tool_calls)
    caps = model.backend.capabilities
    if caps.chat_input:
        return plan, chat_input(body, plan, caps.native_tools), None, None
    return plan, None, _prompt(body, model.tokenizer, plan), _grammar(body, plan)


async def build_request(body: ChatCompletionRequest, request: Request) -> tuple[GenerationRequest, ToolPlan]:
    conch = conch_state(request)
    model = conch.engine.get(body.model)
    plan, chat, prompt, grammar = await asyncio.to_thread(_inputs, body, model)
    gen = GenerationRequest(id=new_id("chatcmpl"), model=body.model, chat=chat, prompt=prompt,
                            params=body.sampling, grammar=grammar, stream=body.stream,
                            add_special_tokens=False,
                            use_cache=body.cache and "no-cache" not in request.headers.get("cache-control", ""))
    return await conch.engine.prepare(gen, prompt_param="messages"), plan


def _outputs(body: ChatCompletionRequest, plan: ToolPlan) -> list[ChatOutput]:
    if not plan.parses_calls or plan.format is None:
        return [ChatOutput(None) for _ in range(body.n)]
    # forced: read eagerly (the grammar wrote calls only, so a call cut by max_tokens still stands)
    return [ChatOutput(plan.format.new_parser(eager=plan.choice.forced), plan.choice) for _ in range(body.n)]


@router.post("/v1/chat/completions")
async def create_chat_completion(body: ChatCompletionRequest, request: Request):
    gen, plan = await build_request(body, request)
    outputs = _outputs(body, plan)
    deltas = conch_state(request).engine.generate(gen)
    if body.stream:                         # primed: an error before the first delta is a status, not an event
        return sse_response(_stream(gen, body, await prime(deltas), outputs))
    # Not primed: a client that hangs up while the request still waits in the queue aborts it there.
    choices = await until_disconnect(request, collect(deltas, body.n))
    return {
        "id": gen.id, "object": "chat.completion", "created": now(), "model": body.model,
        "choices": [_choice(c, body.logprobs, outputs[c.index]) for c in choices], "usage": usage(choices),
    }


def _choice(c: Choice, logprobs: bool, output: ChatOutput) -> dict:
    content, calls = output.whole(c.content)
    message: dict = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "index": c.index, "message": message,
        "logprobs": chat_logprobs(c.logprobs) if logprobs else None,
        "finish_reason": output.finish_reason(c.status),
    }


async def _stream(gen: GenerationRequest, body: ChatCompletionRequest, deltas: AsyncIterator[GenerationDelta],
                  outputs: list[ChatOutput]) -> AsyncIterator[str]:
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
            parts = output.feed(d.text) + (output.finish() if d.finished else [])
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
