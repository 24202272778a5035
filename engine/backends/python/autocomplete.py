"""Triton's `auto_complete_config`: a model.py's static method that fills in its own config (tensors, batch
size, decoupled policy) before `initialize`. The completed config is what the server then serves and shows."""
from __future__ import annotations

from typing import Any

from google.protobuf import json_format

from conch.engine.backends.python.tensor import TritonModelException
from conch.engine.repository.config import ModelConfig
from conch.engine.repository.pbtxt import from_json, to_conch
from conch.engine.tensors.triton_config import to_triton


class AutoCompleteModelConfig:
    def __init__(self, config: dict[str, Any]) -> None:
        self._config = config

    def as_dict(self) -> dict[str, Any]:
        return self._config

    def set_max_batch_size(self, max_batch_size: int) -> None:
        self._config["max_batch_size"] = int(max_batch_size)

    def set_dynamic_batching(self) -> None:
        self._config.setdefault("dynamic_batching", {})

    def set_model_transaction_policy(self, policy: dict[str, Any]) -> None:
        self._config["model_transaction_policy"] = {**self._config.get("model_transaction_policy", {}), **policy}

    def add_input(self, tensor: dict[str, Any]) -> None:
        self._add("input", tensor)

    def add_output(self, tensor: dict[str, Any]) -> None:
        self._add("output", tensor)

    def _add(self, kind: str, tensor: dict[str, Any]) -> None:
        if "name" not in tensor or "data_type" not in tensor:
            raise TritonModelException(f"an {kind} needs a 'name' and a 'data_type': {tensor!r}")
        tensors = self._config.setdefault(kind, [])
        if not any(t.get("name") == tensor["name"] for t in tensors):   # the config's own declaration wins
            tensors.append({"dims": [-1], **tensor})


def auto_complete(model_class: Any, config: ModelConfig) -> ModelConfig:
    """The config the model's `auto_complete_config` returns, or the config itself when it has none."""
    hook = getattr(model_class, "auto_complete_config", None)
    if hook is None:
        return config
    data = json_format.MessageToDict(to_triton(config), preserving_proto_field_name=True)
    completed = hook(AutoCompleteModelConfig(data))
    message = from_json(completed.as_dict() if completed is not None else data, config.name)
    return to_conch(message, config.name, config.path, config.version)
