"""The one sampling-parameter builder every face calls, and the check Engine.prepare runs on every request.

`build_sampling` takes a name -> value mapping as a face read it off its wire (pydantic's typed fields on /v1,
Triton's `parameters` and `sampling_parameters` JSON on /v2 and gRPC), checks each value against its row in
engine/params/table.py and returns SamplingParams, or raises InvalidRequest naming the parameter as the client
wrote it. The faces map that one error to their own 400 body, so the same bad value reads the same everywhere.

`checked_sampling` runs again in Engine.prepare with the model's vocabulary, so no path reaches a backend
without the table's limits (a caller may build SamplingParams itself). It guarantees the sampler that no batch
row can turn into inf or NaN: every float is finite and in range; a temperature below GREEDY_BELOW is greedy
(0.0), as in vLLM (logits / 1e-300 is inf); top_k is 0 (off) or in 1..vocab; min_tokens <= max_tokens; token
ids (logit_bias keys, stop_token_ids) are inside the vocabulary.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable, Mapping

from conch.engine.errors import InvalidRequest
from conch.engine.params.kinds import READERS, TYPE_NAMES, short_repr
from conch.engine.params.table import BY_WIRE_NAME, DEFAULTABLE, PARAMS, Param
from conch.engine.types import SamplingParams

GREEDY_BELOW = 1e-5
MAX_TOP_K = 2**31 - 1                        # where the vocabulary size is not known


_DEFAULT = SamplingParams()


def build_sampling(values: Mapping[str, Any], base: SamplingParams = _DEFAULT,
                   accepted: frozenset[str] | None = None, names: Mapping[str, str] | None = None) -> SamplingParams:
    """`base` with the given values (None = not given); `accepted` limits the wire names a face takes; `names`
    gives a face's own name for a table wire name (Anthropic's `stop_sequences` for `stop`), so its 400s name
    the field as its client wrote it."""
    def named(wire_name: str) -> str:
        return (names or {}).get(wire_name, wire_name)

    given = {k: v for k, v in values.items() if v is not None}
    unknown = sorted(k for k in given if k not in BY_WIRE_NAME or (accepted is not None and k not in accepted))
    if unknown:
        supported = sorted(accepted if accepted is not None else BY_WIRE_NAME)
        raise InvalidRequest(f"unsupported sampling parameter(s) {unknown}; supported: {supported}",
                             param=named(unknown[0]))
    fields: dict[str, Any] = {}
    for wire_name, value in given.items():
        param = BY_WIRE_NAME[wire_name]
        if param.name in fields:
            raise InvalidRequest(f"'{named(wire_name)}' names '{param.name}' a second time", param=named(wire_name))
        fields[param.name] = read_value(param, value, named(wire_name))
    params = replace(base, **fields, model_defaults=DEFAULTABLE - fields.keys())
    _check_together(params, named)
    return _normalized(params, None)


def read_value(param: Param, value: Any, wire_name: str) -> Any:
    """One wire value as its row's type, in its row's range; raises InvalidRequest naming `wire_name`."""
    try:
        out = READERS[param.kind](value)
    except (TypeError, ValueError, OverflowError) as exc:      # OverflowError: int(inf)
        raise InvalidRequest(f"'{wire_name}' must be {TYPE_NAMES[param.kind]}, got {short_repr(value)}",
                             param=wire_name) from exc
    for number in _numbers(param, out):
        if not _in_range(param, number):
            raise InvalidRequest(f"'{wire_name}'{_what(param)} must be in {param.bounds()}, got {number!r}",
                                 param=wire_name)
    if param.kind == "strings" and not all(out):
        raise InvalidRequest(f"'{wire_name}' must not hold an empty string", param=wire_name)
    return out


def _numbers(param: Param, value: Any) -> list[float]:
    """What the row's range bounds: the value itself, each id, each bias, or the number of strings."""
    if param.kind == "bias":
        return [bias for _, bias in value]
    if param.kind == "ints":
        return list(value)
    if param.kind == "strings":
        return [len(value)]
    return [] if param.kind == "bool" else [value]


def _what(param: Param) -> str:
    return {"bias": ": each bias", "ints": ": each id", "strings": ": the number of strings"}.get(param.kind, "")


def _in_range(param: Param, value: float) -> bool:
    if isinstance(value, float) and not math.isfinite(value):
        return False
    above_low = param.low is None or (value > param.low if param.low_open else value >= param.low)
    below_high = param.high is None or (value < param.high if param.high_open else value <= param.high)
    return above_low and below_high


def _check_together(params: SamplingParams, named: Callable[[str], str] = str) -> None:
    least, most = named("min_tokens"), named("max_tokens")
    if params.max_tokens is not None and params.min_tokens > params.max_tokens:
        raise InvalidRequest(f"'{least}' ({params.min_tokens}) must be in [0, {most} ({params.max_tokens})]",
                             param=least)
    if params.max_tokens == 0 and params.prompt_logprobs is None:
        raise InvalidRequest(f"'{most}' 0 is only allowed when scoring the prompt", param=most)


def checked_sampling(params: SamplingParams, vocab_size: int | None = None) -> SamplingParams:
    """`params` with greedy and top_k normalized; raises InvalidRequest naming the first bad parameter."""
    for param in PARAMS:
        value = getattr(params, param.name)
        if value is not None and value != param.default:
            read_value(param, value if param.kind != "bias" else {str(k): b for k, b in value}, param.name)
    _check_together(params)
    if vocab_size is not None:
        _check_token_ids(params, vocab_size)
    return _normalized(params, vocab_size)


def _normalized(params: SamplingParams, vocab_size: int | None) -> SamplingParams:
    top_k = 0 if params.top_k == -1 else min(params.top_k, vocab_size or MAX_TOP_K)
    temperature = 0.0 if params.temperature < GREEDY_BELOW else params.temperature
    if top_k == params.top_k and temperature == params.temperature:
        return params
    return replace(params, top_k=top_k, temperature=temperature)


def _check_token_ids(params: SamplingParams, vocab_size: int) -> None:
    for name, ids in (("logit_bias", [k for k, _ in params.logit_bias]), ("stop_token_ids", params.stop_token_ids)):
        outside = [i for i in ids if not 0 <= i < vocab_size]
        if outside:
            raise InvalidRequest(f"'{name}': token id {outside[0]} is outside the vocabulary (0..{vocab_size - 1})",
                                 param=name)

