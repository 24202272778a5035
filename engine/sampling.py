"""The numeric limits of sampling, checked once for every request whatever face it came through.

Both faces build their SamplingParams through `checked_sampling` (/v1 in gateway/openai/schemas/common.py, /v2
and gRPC in engine/tensors/sampling.py), each on top of its own wire ranges, and Engine.prepare runs it again
with the model's vocabulary, so no path reaches a backend without it. It guarantees the sampler that no batch
row can turn into inf or NaN:
  - every float is finite, and inside the range where the sampler's arithmetic stays finite;
  - a temperature below GREEDY_BELOW is greedy (0.0), as in vLLM: dividing logits by 1e-300 gives inf;
  - top_k is 0 (off) or in 1..vocab: -1 means off, a larger k is the whole vocabulary;
  - min_tokens is in [0, max_tokens];
  - a seed is a 64-bit value, signed or not (torch.Generator's range), else a 400 naming `seed`.
"""
from __future__ import annotations

import math
from dataclasses import replace

from engine.errors import InvalidRequest
from engine.types import SamplingParams

GREEDY_BELOW = 1e-5
SEED_RANGE = (-2**63, 2**64)               # [low, high)
MAX_TOP_K = 2**31 - 1                        # where the vocabulary size is not known
# field -> (low, high), both inclusive; the loosest any face accepts.
_FLOAT_RANGES = {"temperature": (0.0, 100.0), "top_p": (0.0, 1.0), "min_p": (0.0, 1.0),
                 "presence_penalty": (-2.0, 2.0), "frequency_penalty": (-2.0, 2.0),
                 "repetition_penalty": (1e-9, 100.0)}
_OPEN_BELOW = frozenset({"top_p"})          # top_p = 0 would keep no token


def checked_sampling(params: SamplingParams, vocab_size: int | None = None) -> SamplingParams:
    """`params` with greedy and top_k normalized; raises InvalidRequest naming the first bad parameter."""
    for name, (low, high) in _FLOAT_RANGES.items():
        _check_float(name, getattr(params, name), low, high)
    for _, bias in params.logit_bias:
        _check_float("logit_bias", bias, -100.0, 100.0)
    if params.seed is not None and not SEED_RANGE[0] <= params.seed < SEED_RANGE[1]:
        raise InvalidRequest(f"'seed' must be a 64-bit integer in [-2**63, 2**64), got {params.seed}", param="seed")
    if params.min_tokens < 0 or (params.max_tokens is not None and params.min_tokens > params.max_tokens):
        raise InvalidRequest(f"'min_tokens' ({params.min_tokens}) must be in [0, max_tokens ({params.max_tokens})]",
                             param="min_tokens")
    if params.top_k < -1:
        raise InvalidRequest(f"'top_k' must be -1 or 0 (off) or a positive integer, got {params.top_k}", param="top_k")
    top_k = 0 if params.top_k == -1 else min(params.top_k, vocab_size or MAX_TOP_K)
    temperature = 0.0 if params.temperature < GREEDY_BELOW else params.temperature
    if top_k == params.top_k and temperature == params.temperature:
        return params
    return replace(params, top_k=top_k, temperature=temperature)


def _check_float(name: str, value: float, low: float, high: float) -> None:
    if not (math.isfinite(value) and low <= value <= high) or (name in _OPEN_BELOW and value <= low):
        bounds = f"({low}, {high}]" if name in _OPEN_BELOW else f"[{low}, {high}]"
        raise InvalidRequest(f"'{name}' must be a finite number in {bounds}, got {value}", param=name)
