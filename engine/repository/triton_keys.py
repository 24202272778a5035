"""Every top-level key of Triton's `config.pbtxt`, honoured or refused by name: nothing a Triton user writes is
ignored in silence.

The table below is the one place that says what Conch does with each `ModelConfig` field. A field set in a
config (protobuf's `ListFields`: a key that was written, even with its default value) whose row is a refusal
fails the load with that reason; a field the table does not know (a newer Triton's) is refused as unknown.
Honoured keys are read into Conch's `ModelConfig` by pbtxt.py; the readers of `instance_group`,
`response_cache` and `model_warmup` live here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as pb

from conch.engine.errors import InvalidRequest
from conch.engine.repository.warmup import WarmupSample, warmup_samples

HONOURED = frozenset({
    "name", "platform", "backend", "version_policy", "max_batch_size", "input", "output", "dynamic_batching",
    "ensemble_scheduling", "instance_group", "parameters", "model_warmup", "model_transaction_policy",
    "response_cache", "sequence_batching",
    "default_model_filename",    # names the file a backend loads; Conch's python backend reads model.py only
})                               # (checked below)
REFUSED = {
    "batch_input": "batch_input (ragged batch tensors) is not implemented",
    "batch_output": "batch_output (ragged batch tensors) is not implemented",
    "optimization": "optimization settings (CUDA graphs, TensorRT/OpenVINO accelerators, pinned memory) have "
                    "no effect on Conch's engines",
    "runtime": "runtime (a backend's shared library or Python runtime) is chosen by Conch's backend registry",
    "cc_model_filenames": "cc_model_filenames (per-GPU-architecture model files) are not read",
    "metric_tags": "metric_tags are not added to Conch's metrics",
    "model_operations": "model_operations (custom op libraries) are not loaded",
    "model_repository_agents": "model repository agents (checksum, decryption) are not run",
    "model_metrics": "model_metrics (custom histogram buckets) are not implemented",
}
# Backends whose instances may run side by side: each python instance is its own TritonPythonModel; an
# embedding model's instances share its weights (a forward holds no state); text steps are stateless.
INSTANCE_BACKENDS = frozenset({"python", "embedding", "tokenizer", "detokenizer"})
_INSTANCE_KEYS = {"name", "kind", "count", "gpus", "passive", "host_policy", "rate_limiter"}
_LLM_BACKENDS = frozenset({"conch", "transformers", "vllm", "tensorrt_llm", "openai"})   # config.py's, with aliases


def check_keys(message: pb.ModelConfig, name: str) -> None:
    """Refuses, naming it, any key written in the config that Conch does not honour."""
    for field, _ in message.ListFields():
        key = field.name
        if key in REFUSED:
            raise InvalidRequest(f"model '{name}': config key '{key}' is not supported: {REFUSED[key]}",
                                 param=key)
        if key not in HONOURED:
            raise InvalidRequest(f"model '{name}': unknown config key '{key}'", param=key)
    if message.default_model_filename and message.default_model_filename != "model.py":
        raise InvalidRequest(f"model '{name}': default_model_filename "
                             f"{message.default_model_filename!r} is not supported: Conch's python backend "
                             f"loads <version>/model.py", param="default_model_filename")


def instance_count(message: pb.ModelConfig, backend: str, name: str) -> int:
    """The instances the model runs at once: the sum of its instance groups' counts (a group's count is 1 when
    not written). An LLM runs one engine (its continuous batching serves concurrent requests); more is
    refused, as is a group setting Conch cannot honour (rate_limiter, secondary_devices, profile)."""
    groups = list(message.instance_group)
    if not groups:
        return 1
    for group in groups:
        written = {f.name for f, _ in group.ListFields()}
        unknown = sorted(written - _INSTANCE_KEYS)
        if unknown:
            raise InvalidRequest(f"model '{name}': instance_group key '{unknown[0]}' is not supported "
                                 f"(secondary devices and profiles are not implemented)",
                                 param=f"instance_group.{unknown[0]}")
        if group.count < 0:
            raise InvalidRequest(f"model '{name}': instance_group count must be >= 1", param="instance_group")
    return check_instances(sum(max(1, g.count) for g in groups), backend, name)


def check_instances(count: int, backend: str, name: str) -> int:
    """The instance count, if the backend can run that many (config.yaml's `instance_count` too)."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidRequest(f"model '{name}': instance count must be an integer >= 1", param="instance_group")
    if count > 1 and backend not in INSTANCE_BACKENDS:
        why = ("an LLM runs one engine per model, whose continuous batching already serves concurrent "
               "requests; use count 1" if backend in _LLM_BACKENDS else
               f"the {backend} backend runs one instance")
        raise InvalidRequest(f"model '{name}': instance_group count {count} is not supported: {why}",
                             param="instance_group")
    return count


def response_cache(message: pb.ModelConfig, backend: str, name: str) -> bool:
    """Triton's `response_cache { enable }` (off unless written). Conch's response cache stores generations,
    so only an LLM may enable it; the server's cache (`--response-cache`) must be on for it to apply."""
    enabled = message.HasField("response_cache") and message.response_cache.enable
    if enabled and backend not in _LLM_BACKENDS:
        raise InvalidRequest(f"model '{name}': response_cache is supported for LLM models only (Conch caches "
                             f"generations, not the {backend} backend's tensors)", param="response_cache")
    return bool(enabled)


def warmups(message: pb.ModelConfig, name: str) -> tuple[WarmupSample, ...]:
    data: list[Any] = [json_format.MessageToDict(w, preserving_proto_field_name=True)
                       for w in message.model_warmup]
    return warmup_samples(data, name)


@dataclass(frozen=True)
class RateLimit:
    """An instance's `rate_limiter`: the resources one execution holds (engine/resources.py) and its priority
    among the executions waiting for them (lower first)."""

    resources: tuple[tuple[str, int], ...]      # (name, count)
    priority: int = 0


def rate_limit(message: pb.ModelConfig, backend: str, name: str) -> RateLimit | None:
    """The model's rate limit: every instance group declares the same one, or none does. Honoured for python
    models (their instances' executions); another backend's is refused by name."""
    limits = {_group_limit(g) for g in message.instance_group}
    if not limits or limits == {None}:
        return None
    only = next(iter(limits))
    if len(limits) != 1 or only is None:
        raise InvalidRequest(f"model '{name}': every instance_group must declare the same rate_limiter",
                             param="rate_limiter")
    if backend != "python":
        raise InvalidRequest(f"model '{name}': rate_limiter is supported for python models only, not the "
                             f"{backend} backend", param="rate_limiter")
    if any(count < 1 for _, count in only.resources):
        raise InvalidRequest(f"model '{name}': rate_limiter resource counts must be >= 1", param="rate_limiter")
    return only


def _group_limit(group: pb.ModelInstanceGroup) -> RateLimit | None:
    if not group.HasField("rate_limiter"):
        return None
    limiter = group.rate_limiter
    return RateLimit(tuple(sorted((r.name, r.count) for r in limiter.resources)), limiter.priority)
