"""Named tensors: what python models, ensembles and the LLM tensor contract exchange (numpy arrays).

BYTES tensors are numpy object arrays of `bytes`; every other datatype maps to one numpy dtype.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from conch.engine.errors import InvalidRequest
from conch.engine.repository.specs import TensorSpec

Tensors = dict[str, np.ndarray]

NUMPY_DTYPES: dict[str, Any] = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
    "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
    "FP16": np.float16, "FP32": np.float32, "FP64": np.float64, "BYTES": np.object_,
}


def datatype_of(array: np.ndarray) -> str:
    if array.dtype == np.object_ or array.dtype.kind in "SU":
        return "BYTES"
    for name, dtype in NUMPY_DTYPES.items():
        if array.dtype == dtype:
            return name
    raise InvalidRequest(f"numpy dtype {array.dtype} has no KServe datatype")


def bytes_tensor(values: Sequence[str | bytes] | str | bytes) -> np.ndarray:
    items = [values] if isinstance(values, (str, bytes)) else values
    return np.array([v.encode() if isinstance(v, str) else bytes(v) for v in items], dtype=np.object_)


def first_string(array: np.ndarray, name: str) -> str:
    if array.size != 1:
        raise InvalidRequest(f"input '{name}' must hold exactly one element, got shape {list(array.shape)}",
                             param=name)
    value = array.reshape(-1)[0]
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def first_bool(inputs: Tensors, name: str, default: bool = False) -> bool:
    array = inputs.get(name)
    return bool(array.reshape(-1)[0]) if array is not None and array.size else default


@dataclass
class InferTiming:
    """What a tensor backend measured of one request, in seconds. Mutable: the backend fills it in as the
    request runs, and engine/tensors/traced.py copies it into the request's trace (statistics, metrics)."""

    queue: float = 0.0           # waiting for an instance or a batch
    compute_input: float = 0.0   # building the backend's input tensors
    compute_output: float = 0.0  # reading the backend's output tensors back
    batch_size: int = 0          # rows of the execution that ran it


@dataclass(frozen=True)
class InferRequest:
    id: str
    inputs: Tensors
    parameters: dict[str, Any] = field(default_factory=dict)
    timing: InferTiming = field(default_factory=InferTiming, compare=False, repr=False)


def check_inputs(specs: tuple[TensorSpec, ...], inputs: Tensors, model: str) -> None:
    """Unknown, missing, wrongly typed or wrongly shaped inputs are the client's error; names the tensor."""
    by_name = {s.name: s for s in specs}
    for name, array in inputs.items():
        spec = by_name.get(name)
        if spec is None:
            raise InvalidRequest(f"model '{model}' has no input '{name}'; inputs: {sorted(by_name)}", param=name)
        if datatype_of(array) != spec.datatype:
            raise InvalidRequest(f"input '{name}' of model '{model}' must be {spec.datatype}, "
                                 f"got {datatype_of(array)}", param=name)
        if not _shape_fits(spec.dims, array.shape):
            raise InvalidRequest(f"input '{name}' of model '{model}' has shape {list(array.shape)}, "
                                 f"expected {list(spec.dims)}", param=name)
    missing = [s.name for s in specs if not s.optional and s.name not in inputs]
    if missing:
        raise InvalidRequest(f"model '{model}' is missing required input '{missing[0]}'", param=missing[0])


def _shape_fits(dims: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Declared dims, optionally behind a leading batch dimension."""
    if len(shape) == len(dims) + 1:
        shape = shape[1:]
    return len(shape) == len(dims) and all(d == -1 or d == s for d, s in zip(dims, shape, strict=True))
