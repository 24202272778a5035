"""Triton's `triton_python_backend_utils` (pb_utils) over numpy: what a model.py imports by Triton's name and
uses unchanged. The types live in their own files (tensor.py, messages.py, logger.py); this module is the
facade, plus the config lookups Triton's module offers."""
from __future__ import annotations

from typing import Any

from conch.engine.backends.python.logger import Logger, LogLevel
from conch.engine.backends.python.messages import (TRITONSERVER_REQUEST_FLAG_SEQUENCE_END,
                                             TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
                                             TRITONSERVER_RESPONSE_COMPLETE_FINAL, InferenceRequest,
                                             InferenceResponse, InferenceResponseSender, TritonError)
from conch.engine.backends.python.tensor import Tensor, TritonModelException
from conch.engine.tensors.interface import NUMPY_DTYPES

__all__ = ["Logger", "LogLevel", "InferenceRequest", "InferenceResponse", "InferenceResponseSender", "Tensor",
           "TritonError", "TritonModelException", "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
           "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START", "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
           "get_input_tensor_by_name", "get_output_tensor_by_name", "get_input_config_by_name",
           "get_output_config_by_name", "triton_string_to_numpy", "using_decoupled_model_transaction_policy"]


def get_input_tensor_by_name(request: InferenceRequest, name: str) -> Tensor | None:
    return next((t for t in request.inputs() if t.name() == name), None)


def get_output_tensor_by_name(response: InferenceResponse, name: str) -> Tensor | None:
    return next((t for t in response.output_tensors() if t.name() == name), None)


def get_input_config_by_name(model_config: dict, name: str) -> dict | None:
    return next((t for t in model_config.get("input", []) if t.get("name") == name), None)


def get_output_config_by_name(model_config: dict, name: str) -> dict | None:
    return next((t for t in model_config.get("output", []) if t.get("name") == name), None)


def triton_string_to_numpy(data_type: str) -> Any:
    name = data_type.removeprefix("TYPE_")
    return NUMPY_DTYPES["BYTES" if name == "STRING" else name]


def using_decoupled_model_transaction_policy(model_config: dict) -> bool:
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))
