"""Accumulates the engine's deltas into per-choice results: what every face (chat, completions, Responses,
Messages) reads a finished or streaming choice from."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import AsyncIterator

from conch.engine import GenerationDelta, RequestStatus
from conch.engine.errors import InvalidRequest
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
    error_is_request: bool = False               # GenerationDelta.error_is_request
    stop_reason: str | int | None = None         # the stop string or token id that ended the choice

    def add(self, delta: GenerationDelta) -> None:
        self.text.append(delta.text)
        self.token_ids.extend(delta.token_ids)
        self.logprobs.extend(delta.logprobs)
        self.prompt_logprobs = delta.prompt_logprobs or self.prompt_logprobs
        if delta.finished:
            self.status = delta.status
            self.error = delta.error
            self.error_is_request = delta.error_is_request
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
    """Every delta of a non-streamed request, gathered into `total` choices; a failed choice is a 400 when
    its own grammar failed (InvalidRequest, through the error table), else a 500."""
    choices = [Choice(i) for i in range(total)]
    async for delta in deltas:
        choices[delta.index].add(delta)
    for choice in choices:
        if choice.error and choice.error_is_request:
            raise InvalidRequest(choice.error)
        if choice.error:
            raise APIError(500, choice.error)
    return choices
