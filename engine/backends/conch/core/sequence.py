"""One sequence being generated: the per-choice state that the scheduler, runner and sampler share.

Its deltas carry token ids, logprobs and the finish; the text is the pipeline's detokenize step's
(engine/pipeline/detokenize.py), which also applies stop strings."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from conch.engine.types import (
    GenerationDelta, GenerationRequest, PositionLogprobs, RequestStatus, SamplingParams, Usage,
)


@dataclass(eq=False)
class Sequence:
    request: GenerationRequest
    index: int                               # choice index, 0..n-1
    prompt_ids: list[int]
    eos_ids: frozenset[int]                  # EOS and the request's stop_token_ids
    max_total: int                           # context length: prompt + output never exceed it
    generator: torch.Generator | None = None
    matcher: Any = None                      # grammars.Matcher or None
    output_ids: list[int] = field(default_factory=list)
    status: RequestStatus = RequestStatus.WAITING
    stop_reason: str | int | None = None
    error: str | None = None                 # why it ended with FINISHED_ERROR; its final delta carries it
    error_is_request: bool = False           # GenerationDelta.error_is_request: its own grammar failed
    slot: int | None = None                  # its KV store slot while running (the flattened runner's)
    computed: int = 0                        # tokens whose KV is stored; the next step computes from here
    cached: int = 0                          # prompt tokens it found stored (a kept slot, the prefix cache)
    started: bool = False                    # its first prompt chunk has been scheduled (chunked prefill)
    lookup: Any = None                       # its prompt lookup's index (speculation/ngram.py), once it proposes
    vision: Any = None                       # its images (model/vision.py's VisionPrompt), or None
    # Produced but not yet delivered; drained into one GenerationDelta per step.
    _ids: list[int] = field(default_factory=list)
    _logprobs: list[PositionLogprobs] = field(default_factory=list)
    _closed: bool = False                    # the final delta has been drained

    @property
    def request_id(self) -> str:
        return self.request.id

    @property
    def params(self) -> SamplingParams:
        return self.request.params

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def kv_need(self) -> int:
        """The most tokens this sequence may reach: what its KV reservation must hold."""
        limit = self.params.max_tokens
        return min(len(self.prompt_ids) + (limit if limit is not None else self.max_total), self.max_total)

    @property
    def room(self) -> int:
        """Tokens it may still produce before its length limits (max_tokens, the context length) end it."""
        limit = self.params.max_tokens
        left = self.max_total - self.num_tokens
        return min(left, limit - len(self.output_ids)) if limit is not None else left

    def tokens(self, start: int, n: int) -> list[int]:
        """Token ids start..start+n-1 of prompt + output."""
        if start + n <= len(self.prompt_ids):
            return self.prompt_ids[start:start + n]
        return (self.prompt_ids + self.output_ids)[start:start + n]

    @property
    def key_ids(self) -> list[int]:
        """The prompt's ids as the KV caches key it: an image's placeholders keyed by its content."""
        return list(self.vision.key_ids) if self.vision is not None else self.prompt_ids

    def prompt_chunk(self, n: int) -> int:
        """Prompt tokens a chunk from `computed` takes for `n` offered: more where it would end inside an image
        computed whole (VisionPrompt.chunk)."""
        return n if self.vision is None or n == 0 else self.vision.chunk(self.computed, n)

    @property
    def last_token(self) -> int:
        return self.output_ids[-1] if self.output_ids else self.prompt_ids[-1]

    def append(self, token_id: int, logprobs: PositionLogprobs | None = None) -> None:
        """Add one sampled token; finish on a stop token, a finished grammar or the length limit."""
        self.output_ids.append(token_id)
        self._ids.append(token_id)
        if logprobs is not None:
            self._logprobs.append(logprobs)
        if token_id in self.eos_ids and (not self.params.ignore_eos or token_id in self.params.stop_token_ids):
            # ignore_eos ignores EOS only: a stop token id the request names still ends it (as in vLLM)
            self.finish(RequestStatus.FINISHED_STOPPED, token_id)
        elif self.matcher is not None and self.matcher.is_finished():
            self.finish(RequestStatus.FINISHED_STOPPED, None)
        elif self.num_tokens >= self.max_total or (self.params.max_tokens is not None
                                                   and len(self.output_ids) >= self.params.max_tokens):
            self.finish(RequestStatus.FINISHED_LENGTH, None)

    def finish(self, status: RequestStatus, reason: str | int | None = None) -> None:
        if not self.status.is_finished:
            self.status = status
            self.stop_reason = reason

    def fail(self, message: str, is_request: bool = False) -> None:
        """End this sequence alone with an error (finish_reason "error"); the rest of the batch goes on.
        `is_request`: the request's own grammar failed, not the engine."""
        if not self.status.is_finished:
            self.finish(RequestStatus.FINISHED_ERROR)
            self.error = message
            self.error_is_request = is_request

    def drain(self) -> GenerationDelta | None:
        """The delta of everything produced since the last drain; None once the final one is out."""
        if self._closed:
            return None
        finished = self._closed = self.status.is_finished
        delta = GenerationDelta(
            request_id=self.request_id,
            index=self.index,
            token_ids=tuple(self._ids),
            logprobs=tuple(self._logprobs),
            status=self.status,
            usage=Usage(len(self.prompt_ids), len(self.output_ids), self.cached,
                        getattr(self.matcher, "thinking_tokens", 0)) if finished else None,
            cached_tokens=self.cached,
            stop_reason=self.stop_reason,
            error=self.error if finished else None,
            error_is_request=self.error_is_request and finished,
        )
        self._ids.clear()
        self._logprobs.clear()
        return delta
