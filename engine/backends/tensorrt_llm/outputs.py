"""TensorRT-LLM's outputs -> Conch's deltas and stats. Pure: it reads attributes of the objects the LLM API
yields, so it is tested with plain stand-ins (tests/engine/backends/tensorrt_llm/).

A streamed RequestOutput holds one CompletionOutput per choice; each carries what is new since the last
one as `token_ids_diff`, `text_diff` and `logprobs_diff` (per position a {token id: Logprob(logprob, rank)}
dict of the top k plus the chosen token, or, from older builds, the chosen token's float alone), and once
it ends a `finish_reason` ('stop', 'length', 'timeout', 'cancelled') and `stop_reason` (string or id).
"""
from __future__ import annotations

from typing import Any, Callable

from conch.engine.backend import BackendStats
from conch.engine.types import GenerationDelta, PositionLogprobs, RequestStatus, TokenLogprob, Usage

_FINISH = {"stop": RequestStatus.FINISHED_STOPPED, "length": RequestStatus.FINISHED_LENGTH,
           "cancelled": RequestStatus.FINISHED_ABORTED, "timeout": RequestStatus.FINISHED_ABORTED}


def choice_delta(request_id: str, output: Any, prompt_tokens: int, top_logprobs: int | None,
                 piece: Callable[[int], str]) -> GenerationDelta:
    """One CompletionOutput's news as a delta; final (with usage) once it has a finish_reason."""
    ids = tuple(output.token_ids_diff)
    logprobs: tuple[PositionLogprobs, ...] = ()
    if top_logprobs is not None:
        logprobs = tuple(_position(entry, token, top_logprobs, piece)
                         for entry, token in zip(output.logprobs_diff, ids, strict=False))
    status = RequestStatus.RUNNING
    if output.finish_reason:
        status = _FINISH.get(output.finish_reason, RequestStatus.FINISHED_ERROR)
    usage = Usage(prompt_tokens, len(output.token_ids)) if status.is_finished else None
    return GenerationDelta(request_id, output.index, ids, output.text_diff, logprobs, status, usage,
                           stop_reason=output.stop_reason if status == RequestStatus.FINISHED_STOPPED else None)


def aborted_delta(request_id: str, index: int, prompt_tokens: int, generated: int) -> GenerationDelta:
    """The final delta of a choice aborted on its own (TensorRT-LLM aborts whole requests only)."""
    return GenerationDelta(request_id, index, status=RequestStatus.FINISHED_ABORTED,
                           usage=Usage(prompt_tokens, generated))


def _position(entry: Any, token: int, k: int, piece: Callable[[int], str]) -> PositionLogprobs:
    if isinstance(entry, (int, float)):                 # the chosen token's logprob alone
        return PositionLogprobs(TokenLogprob(token, piece(token), float(entry)))
    values = {int(t): float(getattr(lp, "logprob", lp)) for t, lp in entry.items()}
    chosen = TokenLogprob(token, piece(token), values.get(token, float("-inf")))
    best = sorted(values.items(), key=lambda kv: kv[1], reverse=True)[:k]
    return PositionLogprobs(chosen, tuple(TokenLogprob(t, piece(t), v) for t, v in best))


def stats_from_iteration(stats: dict[str, Any], running: int) -> BackendStats:
    """The newest iteration stats dict (LLM.get_stats_async) as BackendStats; `running`: choices in flight
    here, used when the dict has no request counts. KV usage is in blocks: used / max of the paged KV cache.
    Prefix-cache token counts are not reported (its stats count blocks per iteration): left at 0."""
    kv = stats.get("kvCacheStats") or {}
    used, total = kv.get("usedNumBlocks"), kv.get("maxNumBlocks")
    usage = min(1.0, used / total) if isinstance(used, int) and isinstance(total, int) and total > 0 else None
    return BackendStats(running=int(stats.get("numActiveRequests", running)),
                        waiting=int(stats.get("numQueuedRequests", 0)), kv_cache_usage=usage)
