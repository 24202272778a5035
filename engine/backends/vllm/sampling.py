"""Conch's request -> vLLM's SamplingParams, field for field: a pure function over plain values.

`sampling_kwargs` returns the keyword arguments of `vllm.SamplingParams` as a dict (importable and tested
without vllm); `structured_outputs` the keyword arguments of `vllm.sampling_params.StructuredOutputsParams`.
Invariants:
  - one vLLM request per choice (the backend fans n out itself, so that one choice can be aborted), so n is 1
    here and choice i of a seeded request gets seed + i, as the own engine does;
  - top_k 0 is off in both; Conch's logprobs k (the chosen token and the k most likely) is vLLM's
    logprobs k, which returns the same: the sampled token plus the top k;
  - output is streamed as deltas (RequestOutputKind.DELTA) and detokenized by vLLM, stop strings applied there;
  - a grammar is checked up front against the Conch library that mirrors vLLM's structured-output backend
    (grammars.validate), so what vLLM would not enforce is a 400 before the request queues.
"""
from __future__ import annotations

import json
from typing import Any

from conch.engine.errors import InvalidRequest
from conch.engine.types import SamplingParams
from conch.grammars import GrammarError, validate
from conch.grammars.spec import Choice, Grammar, GrammarSpec, JsonObject, JsonSchema, Regex

# Conch fields passed through under the same name and meaning.
_SAME = ("temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty",
         "stop_token_ids", "ignore_eos", "min_tokens", "include_stop_str_in_output", "logprobs")


def sampling_kwargs(params: SamplingParams, index: int = 0) -> dict[str, Any]:
    """vllm.SamplingParams(**this) for choice `index` of a request (n is fanned out by the backend)."""
    kwargs: dict[str, Any] = {name: getattr(params, name) for name in _SAME}
    kwargs["stop_token_ids"] = list(params.stop_token_ids)
    kwargs.update(
        n=1,
        max_tokens=params.max_tokens,
        top_k=params.top_k,
        seed=_seed(params.seed, index),
        stop=list(params.stop),
        logit_bias={token: bias for token, bias in params.logit_bias} or None,
        skip_special_tokens=True,
    )
    return kwargs


def _seed(seed: int | None, index: int) -> int | None:
    """Conch's range is [-2**63, 2**64) (engine/sampling.py) and torch maps a negative seed mod 2**64; vLLM
    reads seed -1 as "no seed", so the seed goes as its value mod 2**64, in [0, 2**64)."""
    return None if seed is None else (seed + index) % 2**64


def structured_outputs(spec: GrammarSpec, library: str) -> dict[str, Any]:
    """StructuredOutputsParams(**this) for a Conch grammar spec; InvalidRequest (param `grammar`) when
    vLLM's structured-output backend, checked through Conch's `library`, would not enforce it exactly."""
    try:
        validate(spec, library)
    except GrammarError as exc:
        raise InvalidRequest(f"the vllm backend ({library}) cannot enforce this grammar: {exc.message}",
                             param="grammar") from exc
    build = _STRUCTURED.get(type(spec))
    if build is None:
        raise InvalidRequest(f"not a grammar spec: {type(spec).__name__}", param="grammar")
    return build(spec)


_STRUCTURED = {
    JsonSchema: lambda s: {"json": json.loads(s.schema)},
    JsonObject: lambda s: {"json_object": True},
    Regex: lambda s: {"regex": s.pattern},
    Choice: lambda s: {"choice": list(s.options)},
    Grammar: lambda s: {"grammar": s.lark},
}
