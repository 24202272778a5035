"""vLLM's streamed outputs -> Conch's GenerationDelta: a pure conversion over vLLM's output fields.

vLLM runs each choice as a request of its own with RequestOutputKind.DELTA, so every `CompletionOutput` seen
here holds only what is new since the last one: `text` (detokenized by vLLM, stop strings already applied),
`token_ids`, `logprobs` (one {token_id: Logprob(logprob, rank, decoded_token)} per new token, holding the
sampled token and the top k by rank), `finish_reason` ("stop" | "length" | "abort" | "error", on the last)
and `stop_reason` (the stop string or token id; None for EOS).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from conch.engine.types import GenerationDelta, PositionLogprobs, RequestStatus, TokenLogprob, Usage

_STATUS = {"stop": RequestStatus.FINISHED_STOPPED, "length": RequestStatus.FINISHED_LENGTH,
           "abort": RequestStatus.FINISHED_ABORTED, "error": RequestStatus.FINISHED_ERROR}


def choice_id(request_id: str, index: int) -> str:
    """The vLLM request id of choice `index` of a Conch request (one vLLM request per choice)."""
    return f"{request_id}#{index}"


@dataclass
class ChoiceStream:
    """One choice's running state: how many tokens it has produced, for the final delta's usage."""

    request_id: str
    index: int
    prompt_tokens: int
    top_k: int | None = None        # SamplingParams.logprobs: k alternatives per position, None = off
    generated: int = 0

    def delta(self, output: Any) -> GenerationDelta:
        """The delta for one DELTA-kind CompletionOutput."""
        self.generated += len(output.token_ids)
        status = _STATUS.get(output.finish_reason, RequestStatus.FINISHED_STOPPED) \
            if output.finish_reason is not None else RequestStatus.RUNNING
        return GenerationDelta(
            request_id=self.request_id, index=self.index, token_ids=tuple(output.token_ids), text=output.text,
            logprobs=positions(output.logprobs, output.token_ids, self.top_k) if self.top_k is not None else (),
            status=status, usage=self._usage() if status.is_finished else None,
            stop_reason=output.stop_reason if status.is_finished else None)

    def ended_without_finish(self) -> GenerationDelta:
        """vLLM's stream closed with no finished output (engine shut down): the choice ends as aborted."""
        return GenerationDelta(request_id=self.request_id, index=self.index,
                               status=RequestStatus.FINISHED_ABORTED, usage=self._usage())

    def _usage(self) -> Usage:
        return Usage(prompt_tokens=self.prompt_tokens, completion_tokens=self.generated)


def positions(logprobs: Iterable[dict[int, Any]] | None, token_ids: Iterable[int],
              k: int | None) -> tuple[PositionLogprobs, ...]:
    """One PositionLogprobs per token: the chosen token's entry and the top k (rank 1..k) in rank order."""
    if not logprobs:
        return ()
    return tuple(_position(entry, token_id, k or 0) for entry, token_id in zip(logprobs, token_ids, strict=True))


def _position(entry: dict[int, Any], token_id: int, k: int) -> PositionLogprobs:
    top = sorted(((tid, lp) for tid, lp in entry.items() if lp.rank is not None and lp.rank <= k),
                 key=lambda item: item[1].rank)
    return PositionLogprobs(chosen=_token(token_id, entry[token_id]), top=tuple(_token(t, lp) for t, lp in top))


def _token(token_id: int, logprob: Any) -> TokenLogprob:
    return TokenLogprob(token_id=token_id, token=logprob.decoded_token or "", logprob=float(logprob.logprob))
