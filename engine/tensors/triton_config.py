"""A model's config as Triton's `ModelConfig` message (what /v2's model config and a python model's
`args["model_config"]` show), its tensors filled in from the tensor contract when the config names none."""
from __future__ import annotations

from dataclasses import fields

from tritonclient.grpc import model_config_pb2 as pb

from conch.engine.repository.config import PARAMETER_KEYS, ModelConfig
from conch.engine.tensors.contract import tensor_interface


def to_triton(config: ModelConfig) -> pb.ModelConfig:
    """The config as Triton's message: the parsed one, or one built from a config.yaml."""
    if config.triton is not None:
        return config.triton
    inputs, outputs = tensor_interface(config)
    message = pb.ModelConfig(name=config.name, backend=config.backend,
                             max_batch_size=0 if not config.is_llm else config.max_batch_size)
    if config.backend == "ensemble":
        message.platform, message.backend = "ensemble", ""
    message.input.extend(pb.ModelInput(name=t.name, data_type=_pb_type(t.datatype), dims=list(t.dims),
                                       optional=t.optional) for t in inputs)
    message.output.extend(pb.ModelOutput(name=t.name, data_type=_pb_type(t.datatype), dims=list(t.dims))
                          for t in outputs)
    message.model_transaction_policy.decoupled = config.decoupled or config.is_llm
    for step in config.steps:
        s = message.ensemble_scheduling.step.add(model_name=step.model, model_version=step.version)
        s.input_map.update(dict(step.input_map))
        s.output_map.update(dict(step.output_map))
    for field in fields(config):
        if field.name in PARAMETER_KEYS and getattr(config, field.name) is not None:
            message.parameters[field.name].string_value = str(getattr(config, field.name))
    return message


def _pb_type(datatype: str) -> int:
    return pb.DataType.Value("TYPE_STRING" if datatype == "BYTES" else f"TYPE_{datatype}")
