"""Helpers of the conformance suite: run a request through the Engine and gather each choice's output."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from conch.engine.engine import Engine
from conch.engine.types import GenerationDelta, GenerationRequest, RequestStatus, SamplingParams, Usage
from tests.engine.backends.conformance.backends import MODEL



def chat(text: str) -> str:
    """A user turn in SmolLM2's chat format (ChatML), so that the instruct model answers rather than ending."""
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


PROMPT = chat("Write a short story about a lighthouse keeper and a storm.")


@dataclass
class Choice:
    """One choice's deltas, gathered: exactly one of them finished (checked in `run`)."""

    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    logprobs: list = field(default_factory=list)
    deltas: int = 0
    status: RequestStatus = RequestStatus.RUNNING
    usage: Usage | None = None
    stop_reason: str | int | None = None

    def add(self, delta: GenerationDelta) -> None:
        assert self.status == RequestStatus.RUNNING, "a delta arrived after this choice's final delta"
        self.text += delta.text
        self.token_ids += delta.token_ids
        self.logprobs += delta.logprobs
        self.deltas += 1
        if delta.finished:
            self.status, self.usage, self.stop_reason = delta.status, delta.usage, delta.stop_reason

    @property
    def finish_reason(self) -> str | None:
        return self.status.finish_reason


def request(prompt: str = PROMPT, rid: str = "r", grammar: Any = None, stream: bool = False,
            prompt_token_ids: tuple[int, ...] | None = None, **params: Any) -> GenerationRequest:
    params.setdefault("max_tokens", 12)
    params.setdefault("temperature", 0.0)
    return GenerationRequest(id=rid, model=MODEL, prompt=None if prompt_token_ids else prompt,
                             prompt_token_ids=prompt_token_ids, params=SamplingParams(**params),
                             grammar=grammar, stream=stream)


async def run(engine: Engine, req: GenerationRequest) -> list[Choice]:
    """Every choice of the request, index order; each must have ended exactly once."""
    choices = [Choice() for _ in range(req.params.n)]
    async for delta in engine.generate(req):
        assert delta.request_id == req.id
        choices[delta.index].add(delta)
    assert all(c.status.is_finished for c in choices), [c.status for c in choices]
    return choices


async def one(engine: Engine, **kwargs: Any) -> Choice:
    (choice,) = await run(engine, request(**kwargs))
    return choice


async def settled(engine: Engine, limit: float = 60.0) -> tuple[int, int]:
    """(running, waiting) once the backend has emptied its batch, or as they are after `limit` seconds: the
    caller asserts zeros (a wait bounded for safety, not a timed assert)."""
    backend = engine.get(MODEL).backend
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while True:
        stats = backend.stats()
        if (stats.running == 0 and stats.waiting == 0) or loop.time() > deadline:
            return stats.running, stats.waiting
        await asyncio.sleep(0.05)
