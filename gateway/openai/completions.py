"""POST /v1/completions. Several prompts become several engine requests; choice index = prompt * n + i."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import AsyncGenerator, AsyncIterator

from fastapi import APIRouter, Request

from conch.engine import GenerationDelta, GenerationRequest
from conch.gateway.aliases import resolve_model
from conch.gateway.errors import APIError
from conch.gateway.choices import Choice, collect
from conch.gateway.openai.choices import completion_logprobs, echo_logprobs, new_id, now, usage
from conch.gateway.json_route import JSONBodyRoute
from conch.gateway.openai.schemas.completions import CompletionRequest
from conch.gateway.openai.structured import output_constraint
from conch.gateway.state import conch_state, wants_cache
from conch.gateway.streaming import error_event, merge, prime, sse_event, sse_response, until_disconnect

router = APIRouter(route_class=JSONBodyRoute)


async def build_requests(body: CompletionRequest, request: Request) -> list[GenerationRequest]:
    """One engine request per prompt, for the served model `body.model` names (its alias resolved)."""
    conch = conch_state(request)
    served = resolve_model(request, body.model)
    model = conch.engine.get(served)
    constraint = await asyncio.to_thread(output_constraint, body)     # a large schema's checks: off the event loop
    grammar = constraint.spec if constraint is not None else None
    params = body.sampling
    if params.prompt_logprobs is not None and not model.backend.capabilities.prompt_logprobs:
        raise APIError(400, f"model '{body.model}' ({model.config.backend} backend) cannot score the prompt: "
                       "echo with logprobs or max_tokens 0 is not supported", param="echo")
    prompts = body.prompts()
    capacity = conch.engine.admission.queue(model.config).capacity(body.n)
    if capacity is not None and len(prompts) > capacity:
        raise APIError(400, f"{len(prompts)} prompts exceed what model '{body.model}' can hold at once "
                       f"({capacity}: its batch and its queue); send at most {capacity} per request", param="prompt")
    base_id = new_id("cmpl")
    out = []
    for i, prompt in enumerate(prompts):
        gen = GenerationRequest(id=f"{base_id}-{i}", model=served, params=params, stream=body.stream,
                                grammar=grammar,
                                use_cache=wants_cache(request, body.cache),
                                prompt=prompt if isinstance(prompt, str) else None,
                                prompt_token_ids=tuple(prompt) if not isinstance(prompt, str) else None)
        out.append(await conch.engine.prepare(gen, prompt_param="prompt"))
    return out


def _indexed(gen: GenerationRequest, offset: int, deltas: AsyncIterator[GenerationDelta]):
    async def shifted():
        async for d in deltas:
            yield replace(d, index=offset + d.index)
    return shifted()


@router.post("/v1/completions")
async def create_completion(body: CompletionRequest, request: Request):
    engine = conch_state(request).engine
    gens = await build_requests(body, request)
    streams = [engine.generate(g) for g in gens]
    if body.stream:                         # primed: an error before the first delta is a status, not an event
        streams = await _prime_all(streams)
    deltas = merge([_indexed(g, k * body.n, s) for k, (g, s) in enumerate(zip(gens, streams, strict=True))])
    response_id = gens[0].id.rsplit("-", 1)[0]
    tokenizer = engine.get(gens[0].model).tokenizer
    echoes = [_echo(tokenizer, g) for g in gens] if body.echo else None
    prompt_tokens = sum(len(g.prompt_token_ids or ()) for g in gens)   # prepare has set the ids
    if body.stream:
        return sse_response(_stream(response_id, body, deltas, len(gens), echoes, prompt_tokens))
    # Not primed: a client that hangs up while its requests still wait in the queue aborts them there.
    choices = await until_disconnect(request, collect(deltas, len(gens) * body.n))
    return {
        "id": response_id, "object": "text_completion", "created": now(), "model": body.model,
        "choices": [_choice(c, body, echoes) for c in choices], "usage": usage(choices, prompt_tokens),
    }


async def _prime_all(streams: list[AsyncGenerator[GenerationDelta, None]]
                     ) -> list[AsyncGenerator[GenerationDelta, None]]:
    """Prime every prompt's stream; if one fails, close those already started (aborting them) and raise."""
    primed: list[AsyncGenerator[GenerationDelta, None]] = []
    try:
        for stream in streams:
            primed.append(await prime(stream))
    except BaseException:
        for stream in primed + streams[len(primed):]:
            await stream.aclose()
        raise
    return primed


@dataclass(frozen=True)
class _Echo:
    """A prompt as echoed: its text, and its first token's text (the one entry of echoed logprobs that is null)."""

    text: str
    first_token: str


def _echo(tokenizer, gen: GenerationRequest) -> _Echo:
    ids = gen.prompt_token_ids or ()
    text = tokenizer.decode(ids) if gen.prompt is None else gen.prompt
    return _Echo(text, tokenizer.decode(ids[:1]))


def _logprobs(body: CompletionRequest, echo: _Echo | None, c: Choice, items: list, offset: int) -> dict | None:
    if body.logprobs is None:
        return None
    generated = completion_logprobs(items, offset)
    return echo_logprobs(echo.first_token, c.prompt_logprobs, generated) if echo is not None else generated


def _choice(c: Choice, body: CompletionRequest, echoes: list[_Echo] | None) -> dict:
    echo = echoes[c.index // body.n] if echoes else None
    prefix = echo.text if echo is not None else ""
    return {
        "index": c.index, "text": prefix + c.content, "finish_reason": c.finish_reason,
        "logprobs": _logprobs(body, echo, c, c.logprobs, len(prefix)),
    }


async def _stream(response_id: str, body: CompletionRequest, deltas: AsyncIterator[GenerationDelta],
                  num_prompts: int, echoes: list[_Echo] | None, prompt_tokens: int) -> AsyncIterator[str]:
    base = {"id": response_id, "object": "text_completion", "created": now(), "model": body.model}
    choices = [Choice(i) for i in range(num_prompts * body.n)]
    offsets = [0] * len(choices)

    def chunk(index: int, text: str, finish: str | None, logprobs) -> str:
        out = {**base, "choices": [{"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish}]}
        if body.include_usage:
            out["usage"] = None
        return sse_event(out)

    # An echo is sent at once; with logprobs, once the choice's first delta has brought the prompt's.
    scored = echoes is not None and body.logprobs is not None
    unechoed = {c.index for c in choices} if scored else set()
    for c in choices if echoes and not scored else ():
        assert echoes is not None           # for mypy: the loop runs only with echoes
        offsets[c.index] = len(echoes[c.index // body.n].text)
        yield chunk(c.index, echoes[c.index // body.n].text, None, None)
    try:
        async for d in deltas:
            choices[d.index].add(d)
            if d.error:
                yield error_event(d.error)
                return
            if d.index in unechoed:
                unechoed.discard(d.index)
                assert echoes is not None       # for mypy: unechoed is empty without echoes
                echo = echoes[d.index // body.n]
                offsets[d.index] = len(echo.text)
                yield chunk(d.index, echo.text, None, _logprobs(body, echo, choices[d.index], [], 0))
            lp = completion_logprobs(list(d.logprobs), offsets[d.index]) if body.logprobs is not None else None
            offsets[d.index] += len(d.text)
            if d.text or d.finished:
                yield chunk(d.index, d.text, d.finish_reason if d.finished else None, lp)
    except Exception as exc:
        yield error_event(exc)
        return
    if body.include_usage:
        yield sse_event({**base, "choices": [], "usage": usage(choices, prompt_tokens)})
    yield sse_event("[DONE]")
