"""The part of Triton's `triton_python_backend_utils` (pb_utils) that a model.py uses, over numpy.

A model.py written for Triton's Python backend imports this module by Triton's name and runs unchanged:
`get_input_tensor_by_name(request, "X").as_numpy()`, `Tensor("Y", array)`, `InferenceResponse([...])`.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from engine.tensors.interface import NUMPY_DTYPES


class TritonError(Exception):
    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self._message = message

    def message(self) -> str:
        return self._message


class TritonModelException(Exception):
    pass


class Tensor:
    def __init__(self, name: str, array: Any) -> None:
        self._name = name
        array = np.asarray(array)
        if array.dtype.kind in "SU":                    # Triton models often build BYTES with np.str_ / np.bytes_
            array = np.array([v.encode() if isinstance(v, str) else bytes(v) for v in array.reshape(-1)],
                             dtype=np.object_).reshape(array.shape)
        self._array = array

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array


class InferenceRequest:
    def __init__(self, inputs: list[Tensor], request_id: str = "", parameters: dict | None = None) -> None:
        self._inputs, self._id, self._parameters = inputs, request_id, parameters or {}

    def inputs(self) -> list[Tensor]:
        return self._inputs

    def request_id(self) -> str:
        return self._id

    def parameters(self) -> str:
        return json.dumps(self._parameters)


class InferenceResponse:
    def __init__(self, output_tensors: list[Tensor] | None = None, error: TritonError | None = None) -> None:
        self._outputs, self._error = output_tensors or [], error

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error


def get_input_tensor_by_name(request: InferenceRequest, name: str) -> Tensor | None:
    return next((t for t in request.inputs() if t.name() == name), None)


def get_output_tensor_by_name(response: InferenceResponse, name: str) -> Tensor | None:
    return next((t for t in response.output_tensors() if t.name() == name), None)


def get_input_config_by_name(model_config: dict, name: str) -> dict | None:
    return next((t for t in model_config.get("input", []) if t.get("name") == name), None)


def get_output_config_by_name(model_config: dict, name: str) -> dict | None:
    return next((t for t in model_config.get("output", []) if t.get("name") == name), None)


def triton_string_to_numpy(data_type: str):
    name = data_type.removeprefix("TYPE_")
    return NUMPY_DTYPES["BYTES" if name == "STRING" else name]
