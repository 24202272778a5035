"""Cached values: a request's deltas as one msgpack array, without request ids (the hit gets its own).

One delta = [index, token_ids, text, status, usage | None, stop_reason, logprobs], where usage is
[prompt, completion] and logprobs is [[chosen, [top...]], ...] with each token as [id, text, logprob].
"""
from __future__ import annotations

import msgpack

from conch.engine.types import GenerationDelta, PositionLogprobs, RequestStatus, TokenLogprob, Usage


def _token(t: TokenLogprob) -> list:
    return [t.token_id, t.token, t.logprob]


def _encode_one(d: GenerationDelta) -> list:
    usage = [d.usage.prompt_tokens, d.usage.completion_tokens] if d.usage is not None else None
    logprobs = [[_token(p.chosen), [_token(t) for t in p.top]] for p in d.logprobs]
    return [d.index, list(d.token_ids), d.text, int(d.status), usage, d.stop_reason, logprobs]


def encode(deltas: list[GenerationDelta]) -> bytes:
    return msgpack.packb([_encode_one(d) for d in deltas], use_bin_type=True)


def decode(blob: bytes, request_id: str) -> list[GenerationDelta]:
    out = []
    for index, ids, text, status, usage, stop_reason, logprobs in msgpack.unpackb(blob, raw=False):
        out.append(GenerationDelta(
            request_id=request_id, index=index, token_ids=tuple(ids), text=text, status=RequestStatus(status),
            usage=Usage(*usage) if usage is not None else None, stop_reason=stop_reason,
            logprobs=tuple(PositionLogprobs(TokenLogprob(*c), tuple(TokenLogprob(*t) for t in top))
                           for c, top in logprobs)))
    return out
