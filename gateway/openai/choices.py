"""Accumulates the engine's deltas into per-choice results and renders OpenAI's logprobs shapes."""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from typing import AsyncIterator

from conch.engine import GenerationDelta, RequestStatus
from conch.engine.types import PositionLogprobs
from conch.gateway.errors import APIError


@dataclass
class Choice:
    index: int
    text: list[str] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[PositionLogprobs] = field(default_factory=list)
    prompt_logprobs: tuple[PositionLogprobs, ...] = ()
    status: RequestStatus | None = None          # set when the choice ends; .finish_reason is OpenAI's word
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0                       # prompt tokens reused (prefix cache, kept slot)
    reasoning_tokens: int = 0                    # completion tokens spent thinking
    error: str | None = None
    stop_reason: str | int | None = None         # the stop string or token id that ended the choice

    def add(self, delta: GenerationDelta) -> None:
        self.text.append(delta.text)
        self.token_ids.extend(delta.token_ids)
        self.logprobs.extend(delta.logprobs)
        self.prompt_logprobs = delta.prompt_logprobs or self.prompt_logprobs
        if delta.finished:
            self.status = delta.status
            self.error = delta.error
            self.stop_reason = delta.stop_reason
            if delta.usage is not None:
                self.prompt_tokens = delta.usage.prompt_tokens
                self.completion_tokens = delta.usage.completion_tokens
                self.cached_tokens = delta.usage.cached_tokens
                self.reasoning_tokens = delta.usage.reasoning_tokens

    @property
    def finish_reason(self) -> str | None:
        return self.status.finish_reason if self.status is not None else None

    @property
    def content(self) -> str:
        return "".join(self.text)


async def collect(deltas: AsyncIterator[GenerationDelta], total: int) -> list[Choice]:
    """Every delta of a non-streamed request, gathered into `total` choices; a failed choice is a 500."""
    choices = [Choice(i) for i in range(total)]
    async for delta in deltas:
        choices[delta.index].add(delta)
    for choice in choices:
        if choice.error:
            raise APIError(500, choice.error, type="internal_error")
    return choices


def usage(choices: list[Choice], prompt_tokens: int | None = None) -> dict:
    """One prompt is counted once per distinct prompt, completions summed over every choice."""
    prompt = prompt_tokens if prompt_tokens is not None else max((c.prompt_tokens for c in choices), default=0)
    completion = sum(c.completion_tokens for c in choices)
    cached = max((c.cached_tokens for c in choices), default=0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": sum(c.reasoning_tokens for c in choices)}}


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def now() -> int:
    return int(time.time())


def chat_logprobs(items: list[PositionLogprobs]) -> dict:
    def entry(t) -> dict:
        return {"token": t.token, "logprob": t.logprob, "bytes": list(t.token.encode("utf-8"))}

    return {"content": [{**entry(p.chosen), "top_logprobs": [entry(t) for t in p.top]} for p in items]}


def echo_logprobs(first_token: str, prompt: tuple[PositionLogprobs, ...], generated: dict) -> dict:
    """The prompt's entries (the first token's logprob null: it has no context) before the generated ones."""
    scored = completion_logprobs(list(prompt), len(first_token))
    return {
        "tokens": [first_token, *scored["tokens"], *generated["tokens"]],
        "token_logprobs": [None, *scored["token_logprobs"], *generated["token_logprobs"]],
        "top_logprobs": [None, *scored["top_logprobs"], *generated["top_logprobs"]],
        "text_offset": [0, *scored["text_offset"], *generated["text_offset"]],
    }


def completion_logprobs(items: list[PositionLogprobs], offset: int = 0) -> dict:
    tokens, offsets, pos = [], [], offset
    for p in items:
        tokens.append(p.chosen.token)
        offsets.append(pos)
        pos += len(p.chosen.token)
    return {
        "tokens": tokens,
        "token_logprobs": [p.chosen.logprob for p in items],
        "top_logprobs": [{t.token: t.logprob for t in p.top} for p in items],
        "text_offset": offsets,
    }
