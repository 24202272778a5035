"""Conch's request and model config -> TensorRT-LLM's LLM API arguments. Pure: plain dicts out, so it is
tested without the package (tests/engine/backends/tensorrt_llm/); backend.py builds the objects.

TensorRT-LLM's names (tensorrt_llm.SamplingParams, GuidedDecodingParams, LLM(...)): `top_k`/`top_p`/
`temperature` None mean its runtime defaults; greedy is top_k 1; guided decoding is xgrammar's (json schema,
json_object, regex, EBNF grammar), a choice becomes a regex of its escaped options.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from conch.engine.errors import InvalidRequest
from conch.engine.repository.config import ModelConfig
from conch.engine.types import GenerationRequest, SamplingParams
from conch.grammars import Choice, Grammar, JsonObject, JsonSchema, Regex

# Triton's tensorrtllm model parameters (config.pbtxt) -> where they go in LLM(...) / its KvCacheConfig.
_TRITON_KV: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "kv_cache_free_gpu_mem_fraction": ("free_gpu_memory_fraction", float),
    "max_tokens_in_paged_kv_cache": ("max_tokens", int),
    "enable_kv_cache_reuse": ("enable_block_reuse", lambda v: str(v).lower() in ("true", "1")),
}
_REGEX_META = frozenset(r"\.^$*+?()[]{}|")


@dataclass(frozen=True)
class TRTRequest:
    """One request in TensorRT-LLM's terms: token ids in, SamplingParams(**sampling) with
    guided_decoding=GuidedDecodingParams(**guided), and logit_bias as an embedding_bias tensor."""

    prompt_token_ids: tuple[int, ...]
    sampling: dict[str, Any]
    guided: dict[str, Any] | None = None
    logit_bias: tuple[tuple[int, float], ...] = ()    # (token id, bias); the backend densifies it
    top_logprobs: int | None = None                   # Conch's k: how many alternatives each delta keeps


def to_trt_request(request: GenerationRequest) -> TRTRequest:
    if request.prompt_token_ids is None:
        raise InvalidRequest("the tensorrt_llm backend takes token ids (Engine.prepare tokenizes)", param="prompt")
    p = request.params
    return TRTRequest(tuple(request.prompt_token_ids), sampling_kwargs(p),
                      guided_kwargs(request.grammar) if request.grammar is not None else None,
                      p.logit_bias, p.logprobs)


def sampling_kwargs(p: SamplingParams) -> dict[str, Any]:
    """SamplingParams fields one to one; a field at Conch's neutral value is left to TensorRT-LLM's default."""
    if p.prompt_logprobs is not None:
        raise InvalidRequest("the tensorrt_llm backend does not return prompt logprobs", param="prompt_logprobs")
    if p.max_tokens is None:
        raise InvalidRequest("max_tokens must be resolved before the backend (Engine.prepare)", param="max_tokens")
    out: dict[str, Any] = {"max_tokens": p.max_tokens, "n": p.n, "ignore_eos": p.ignore_eos,
                           "include_stop_str_in_output": p.include_stop_str_in_output, "detokenize": True}
    if p.greedy:
        out["top_k"] = 1                         # TensorRT-LLM's greedy: temperature must stay > 0 or unset
    else:
        out["temperature"] = p.temperature
        if p.top_k:
            out["top_k"] = p.top_k
        if p.top_p < 1.0:
            out["top_p"] = p.top_p
        if p.min_p:
            out["min_p"] = p.min_p
    if p.seed is not None:
        out["seed"] = p.seed % 2**64             # Conch's seed is in [-2**63, 2**64); TensorRT-LLM's is a uint64
    for name, neutral in (("presence_penalty", 0.0), ("frequency_penalty", 0.0), ("repetition_penalty", 1.0)):
        if getattr(p, name) != neutral:
            out[name] = getattr(p, name)
    if p.stop:
        out["stop"] = list(p.stop)
    if p.stop_token_ids:
        out["stop_token_ids"] = list(p.stop_token_ids)
    if p.min_tokens:
        out["min_tokens"] = p.min_tokens
    if p.logprobs is not None:
        out["logprobs"] = max(1, p.logprobs)     # it returns the top k with the chosen token; k 0 keeps the chosen
    return out


def guided_kwargs(spec: Any) -> dict[str, Any]:
    """A grammars spec -> GuidedDecodingParams fields (exactly one set)."""
    if isinstance(spec, JsonSchema):
        return {"json": spec.as_dict()}
    if isinstance(spec, JsonObject):
        return {"json_object": True}
    if isinstance(spec, Regex):
        return {"regex": spec.pattern}
    if isinstance(spec, Choice):
        return {"regex": "(" + "|".join(map(_literal, spec.options)) + ")"}
    if isinstance(spec, Grammar):
        raise InvalidRequest("the tensorrt_llm backend takes EBNF grammars (xgrammar), not Lark ones; use a JSON "
                             "schema, a regex or a choice", param="grammar")
    raise InvalidRequest(f"not a grammar spec: {type(spec).__name__}", param="grammar")


def _literal(text: str) -> str:
    """`text` as a regex matching itself: only the metacharacters escaped (re.escape also escapes spaces and
    other characters, which a non-Python regex dialect may not take)."""
    return "".join("\\" + c if c in _REGEX_META else c for c in text)


def llm_kwargs(config: ModelConfig, weights: str) -> dict[str, Any]:
    """LLM(**kwargs) for a model: `weights` is a Hugging Face checkpoint folder (built into an engine at load)
    or a built engine folder. Triton's tensorrtllm parameters are read where they apply (gpt_model_path,
    tokenizer_dir, the KV cache ones); `engine_args` (a JSON object, as vLLM's model.json) overrides last.
    kv_cache_config is a plain dict here (KvCacheConfig's fields)."""
    params = config.parameters
    out: dict[str, Any] = {
        "model": params.get("gpt_model_path") or weights,
        "tokenizer": params.get("tokenizer_dir") or config.resolve(config.tokenizer) or weights,
        "dtype": config.dtype, "max_batch_size": config.max_batch_size, "max_seq_len": config.context_length,
    }
    kv = {field: convert(params[key]) for key, (field, convert) in _TRITON_KV.items() if key in params}
    if kv:
        out["kv_cache_config"] = kv
    extra = params.get("engine_args")
    if isinstance(extra, str):
        try:
            extra = json.loads(extra)
        except ValueError as exc:
            raise InvalidRequest(f"model '{config.name}': engine_args is not JSON: {exc}", param="config") from exc
    if extra is not None and not isinstance(extra, dict):
        raise InvalidRequest(f"model '{config.name}': engine_args must be a JSON object", param="config")
    return {**out, **(extra or {})}
