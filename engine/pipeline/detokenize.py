"""The detokenize step: the generate step's token ids -> text, incrementally, with the request's stop strings.

Per choice, text never ends inside a UTF-8 character, and text that may still become a stop string is held back
until it cannot. A stop string ends its choice at once: the final delta carries the text before it (through it
with include_stop_str_in_output), the tokens up to the one that completed it, and usage counting those; the
backend is told to stop that choice, and whatever it produced for it meanwhile is dropped (its reasoning tokens
counted here, thinking.py, since the backend's own count covers tokens past the stop). A stop token (EOS or
one of stop_token_ids) ends a choice in the backend (neither ends one before min_tokens tokens); it counts in
usage but is never decoded into the text."""
from __future__ import annotations

from dataclasses import replace
from typing import AsyncGenerator, AsyncIterator

from conch.engine.backend import LLMBackend
from conch.engine.pipeline.incremental import IncrementalDetokenizer
from conch.engine.pipeline.stop import StopChecker
from conch.engine.pipeline.thinking import ThinkingCount
from conch.engine.types import GenerationDelta, GenerationRequest, RequestStatus, Usage

_FLUSHED = (RequestStatus.FINISHED_STOPPED, RequestStatus.FINISHED_LENGTH)   # ends that release held text


class ChoiceText:
    """One choice's text state: the incremental detokenizer, its stop strings and the tokens seen."""

    def __init__(self, tokenizer, request: GenerationRequest) -> None:
        p = request.params
        self.detokenizer = IncrementalDetokenizer(tokenizer)
        self.stop = StopChecker(p.stop, p.include_stop_str_in_output)
        self.prompt_tokens = len(request.prompt_token_ids or ())
        self.tokens = 0
        self.min_tokens = p.min_tokens
        self.done = False           # its final delta is out
        control = request.reasoning
        self.thinking = ThinkingCount(control, request.grammar is not None) if control is not None else None

    def apply(self, delta: GenerationDelta) -> GenerationDelta:
        """`delta` with its text; finished early (and truncated) if a stop string completes in it."""
        ids = delta.token_ids
        decoded = ids[:-1] if _ends_on_stop_token(delta) else ids
        pieces = []
        for k, token in enumerate(decoded):
            text = self.detokenizer.add(token)
            if self.tokens + k + 1 < self.min_tokens:   # as vLLM: stop strings apply from min_tokens on
                pieces.append(text)
                continue
            result = self.stop.feed(text)
            pieces.append(result.text)
            if result.stopped_by is not None:
                self.done = True
                self._count(ids[:k + 1])
                usage = Usage(self.prompt_tokens, self.tokens, delta.cached_tokens, self._thinking_tokens())
                return replace(delta, token_ids=ids[:k + 1], logprobs=delta.logprobs[:k + 1], text="".join(pieces),
                               status=RequestStatus.FINISHED_STOPPED, stop_reason=result.stopped_by,
                               usage=usage, error=None)
        self._count(ids)
        if delta.status in _FLUSHED:
            tail = self.stop.feed(self.detokenizer.flush())
            pieces.append(tail.text if tail.stopped_by else tail.text + self.stop.flush())
            if tail.stopped_by is not None:
                delta = replace(delta, status=RequestStatus.FINISHED_STOPPED, stop_reason=tail.stopped_by)
        self.done = delta.finished
        return replace(delta, text="".join(pieces))

    def _count(self, ids: tuple[int, ...]) -> None:
        self.tokens += len(ids)
        if self.thinking is not None:
            for token in ids:
                self.thinking.add(token)

    def _thinking_tokens(self) -> int:
        return self.thinking.tokens if self.thinking is not None else 0


def _ends_on_stop_token(delta: GenerationDelta) -> bool:
    return (delta.status == RequestStatus.FINISHED_STOPPED and isinstance(delta.stop_reason, int)
            and bool(delta.token_ids) and delta.token_ids[-1] == delta.stop_reason)


async def detokenize(backend: LLMBackend, request: GenerationRequest,
                     deltas: AsyncIterator[GenerationDelta]) -> AsyncGenerator[GenerationDelta, None]:
    """The text deltas of `deltas` (the backend's stream for `request`). Ends once every choice has ended; the
    caller closes `deltas` then, which stops whatever the backend still runs for the request."""
    choices: dict[int, ChoiceText] = {}
    open_choices = request.params.n
    async for delta in deltas:
        choice = choices.get(delta.index)
        if choice is None:
            choice = choices[delta.index] = ChoiceText(backend.tokenizer, request)
        elif choice.done:
            continue                                   # produced after a stop string ended the choice
        out = choice.apply(delta)
        yield out
        if choice.done:
            open_choices -= 1
            if open_choices == 0:
                return
            if not delta.finished:                     # a stop string: the backend still runs this choice
                await backend.abort(request.id, delta.index)
