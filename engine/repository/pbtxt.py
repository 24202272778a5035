"""Triton's `config.pbtxt`: protobuf text format into tritonclient's `ModelConfig` message, and that into
Conch's `ModelConfig` (the way back, with the tensor contract filled in, is engine/tensors/triton_config.py).

Conch's own settings (weights, dtype, context_length...) may come as `parameters { key: ... }` entries: every
key whose declaration (config.py) names the `parameters` source, each read as its type by its rule.
A vLLM-layout folder (`backend: "vllm"` + `<version>/model.json`) keeps its engine arguments in
`parameters["engine_args"]`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2 as pb

from conch.engine.errors import InvalidRequest
from conch.engine.repository.batching import DynamicBatching
from conch.engine.repository.config import BACKEND_ALIASES, LLM_BACKENDS, PARAMETER_KEYS, ModelConfig
from conch.engine.repository.contracts import check_llm_tensors
from conch.engine.repository.sequence import sequence_batching
from conch.engine.repository.specs import EnsembleStep, TensorSpec, VersionPolicy
from conch.engine.repository.triton_keys import check_keys, instance_count, rate_limit, response_cache, warmups

def parse_pbtxt(text: str, name: str) -> pb.ModelConfig:
    message = pb.ModelConfig()
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as exc:
        raise InvalidRequest(f"model '{name}': config.pbtxt does not parse: {exc}", param="config") from exc
    if not message.name:
        message.name = name
    return message


def from_json(data: dict[str, Any], name: str) -> pb.ModelConfig:
    """A config given as JSON (the repository extension's `parameters.config`)."""
    message = pb.ModelConfig()
    try:
        json_format.ParseDict(data, message)
    except json_format.ParseError as exc:
        raise InvalidRequest(f"model '{name}': config override does not parse: {exc}", param="config") from exc
    message.name = message.name or name
    return message


def to_conch(message: pb.ModelConfig, name: str, path: str | None, version: str) -> ModelConfig:
    check_keys(message, name)                        # every key written is honoured below, or refused by name
    backend = _backend(message)
    data: dict[str, Any] = {"backend": backend, "decoupled": message.model_transaction_policy.decoupled}
    if message.max_batch_size > 0:
        data["max_batch_size"] = message.max_batch_size
    params = {k: v.string_value for k, v in message.parameters.items()}
    data.update(_conch_backend(params, backend, name))
    data.update(instance_count=instance_count(message, data["backend"], name),
                response_cache=response_cache(message, data["backend"], name), model_warmup=warmups(message, name),
                rate_limiter=rate_limit(message, data["backend"], name),
                sequence_batching=sequence_batching(message.sequence_batching if message.HasField(
                    "sequence_batching") else None, data["backend"], name))
    data.update({k: params.pop(k) for k in list(params) if k in PARAMETER_KEYS})
    if backend == "vllm" and path is not None:
        params["engine_args"] = _model_json(Path(path) / version / "model.json", name)
    policy = json_format.MessageToDict(message.version_policy, preserving_proto_field_name=True)
    if message.HasField("dynamic_batching"):
        data["dynamic_batching"] = DynamicBatching.from_mapping(
            json_format.MessageToDict(message.dynamic_batching, preserving_proto_field_name=True))
    config = ModelConfig(
        name=name, path=path, version=version, parameters=params, triton=message,
        inputs=tuple(_spec(t) for t in message.input), outputs=tuple(_spec(t) for t in message.output),
        steps=tuple(_step(s) for s in message.ensemble_scheduling.step),
        version_policy=VersionPolicy.from_mapping(policy), **data)
    check_llm_tensors(config)
    return config


def _conch_backend(params: dict[str, str], backend: str, name: str) -> dict[str, Any]:
    """`conch_backend`: the LLM backend that serves a model in place of the one its config names (Conch's own
    engine standing in for TensorRT-LLM on a CPU); its weights default to the `tokenizer_dir` folder."""
    chosen = params.pop("conch_backend", None)
    if chosen is None:
        return {}
    chosen, backend = (BACKEND_ALIASES.get(b, b) for b in (chosen, backend))
    if chosen not in LLM_BACKENDS or backend not in LLM_BACKENDS:
        raise InvalidRequest(f"model '{name}': conch_backend {chosen!r} must name an LLM backend "
                             f"({sorted(LLM_BACKENDS)}) and stand in for one", param="config")
    weights = params.get("weights") or params.get("tokenizer_dir")
    return {"backend": chosen, **({"weights": weights} if weights else {})}


_TRITON_NAMES = {"tensorrtllm": "tensorrt_llm"}   # Triton's backend names that Conch spells otherwise


def _backend(message: pb.ModelConfig) -> str:
    if message.platform == "ensemble" or message.ensemble_scheduling.step:
        return "ensemble"
    if message.backend:
        return _TRITON_NAMES.get(message.backend, message.backend)
    if message.platform:
        return message.platform
    raise InvalidRequest(f"model '{message.name}': config.pbtxt names neither a backend nor a platform",
                         param="config")


def _spec(t: pb.ModelInput | pb.ModelOutput) -> TensorSpec:
    datatype = pb.DataType.Name(t.data_type).removeprefix("TYPE_")
    return TensorSpec(t.name, "BYTES" if datatype == "STRING" else datatype, tuple(t.dims) or (-1,),
                      bool(getattr(t, "optional", False)))


def _step(s) -> EnsembleStep:
    return EnsembleStep(s.model_name, tuple(s.input_map.items()), tuple(s.output_map.items()), s.model_version)


def _model_json(path: Path, name: str) -> dict[str, Any]:
    if not path.exists():
        raise InvalidRequest(f"model '{name}': the vllm backend needs {path}", param="config")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"model '{name}': {path} is not valid JSON: {exc}", param="config") from exc
