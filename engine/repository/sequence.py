"""Triton's `sequence_batching` for python models: requests that carry a sequence id (correlation id) and
start / end flags run in order, each sequence on one instance, with the control tensors and the implicit
state the config declares.

    sequence_batching {
      max_sequence_idle_microseconds: 5000000      # a sequence idle this long is dropped (default 1 s)
      direct { }                                   # or oldest { ... }: both run a sequence's requests in order
      control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
                      { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] } ]
      state [ { input_name: "IN_STATE" output_name: "OUT_STATE" data_type: TYPE_INT32 dims: [ 1 ]
                initial_state { name: "z" data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } } ]
    }

Control kinds: CONTROL_SEQUENCE_START, _END, _READY (each with its false/true values as int32, fp32 or
bool) and _CORRID (the id, as its data_type). A state starts as zeros (or its `initial_state` zeros); each
response's `output_name` tensor becomes the next request's `input_name` tensor and is not returned.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from tritonclient.grpc import model_config_pb2 as pb

from conch.engine.errors import InvalidRequest

_DTYPES = {"TYPE_BOOL": np.bool_, "TYPE_INT32": np.int32, "TYPE_INT64": np.int64, "TYPE_UINT32": np.uint32,
           "TYPE_UINT64": np.uint64, "TYPE_FP32": np.float32, "TYPE_FP64": np.float64, "TYPE_INT8": np.int8,
           "TYPE_UINT8": np.uint8, "TYPE_INT16": np.int16, "TYPE_FP16": np.float16, "TYPE_STRING": np.object_}
KINDS = ("CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_READY", "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_CORRID")


@dataclass(frozen=True)
class Control:
    input_name: str
    kind: str                   # one of KINDS
    dtype: Any                  # numpy dtype of the tensor
    false: Any = 0
    true: Any = 1

    def tensor(self, flags: dict[str, bool], corrid: int | str, batched: bool) -> np.ndarray:
        if self.kind == "CONTROL_SEQUENCE_CORRID":
            value: Any = str(corrid).encode() if self.dtype is np.object_ else corrid
        else:
            value = self.true if flags[self.kind] else self.false
        array = np.array([value], dtype=self.dtype)
        return array.reshape(1, 1) if batched else array


@dataclass(frozen=True)
class State:
    input_name: str
    output_name: str
    dtype: Any
    dims: tuple[int, ...]

    def initial(self, batched: bool) -> np.ndarray:
        shape = tuple(max(1, d) for d in self.dims)
        return np.zeros(((1,) if batched else ()) + shape, dtype=self.dtype)


@dataclass(frozen=True)
class SequenceBatching:
    strategy: str                          # direct | oldest
    idle_seconds: float
    controls: tuple[Control, ...] = ()
    states: tuple[State, ...] = ()


def sequence_batching(message: Any, backend: str, name: str) -> SequenceBatching | None:
    """Triton's ModelSequenceBatching message, for a python model; None when the config has none."""
    if message is None:
        return None
    if backend != "python":
        raise InvalidRequest(f"model '{name}': config key 'sequence_batching' is supported for python models "
                             f"only, not the {backend} backend", param="sequence_batching")
    if message.iterative_sequence:
        raise InvalidRequest(f"model '{name}': sequence_batching iterative_sequence is not supported",
                             param="sequence_batching")
    strategy = "oldest" if message.HasField("oldest") else "direct"
    idle = (message.max_sequence_idle_microseconds or 1_000_000) / 1e6
    controls = tuple(_control(name, c.name, k) for c in message.control_input for k in c.control)
    states = tuple(State(s.input_name, s.output_name, _dtype(name, s.data_type), tuple(s.dims))
                   for s in message.state)
    return SequenceBatching(strategy, idle, controls, states)


def _control(model: str, input_name: str, control: Any) -> Control:
    kind = pb.ModelSequenceBatching.Control.Kind.Name(control.kind)
    if kind == "CONTROL_SEQUENCE_CORRID":
        return Control(input_name, kind, _dtype(model, control.data_type))
    for values, dtype in ((control.int32_false_true, np.int32), (control.fp32_false_true, np.float32),
                          (control.bool_false_true, np.bool_)):
        if len(values) == 2:
            return Control(input_name, kind, dtype, values[0], values[1])
    raise InvalidRequest(f"model '{model}': sequence control '{input_name}' ({kind}) needs its false and true "
                         f"values (int32_false_true, fp32_false_true or bool_false_true)", param="sequence_batching")


def _dtype(model: str, data_type: int) -> Any:
    name = pb.DataType.Name(data_type)
    if name not in _DTYPES:
        raise InvalidRequest(f"model '{model}': sequence_batching data type {name} is not supported",
                             param="sequence_batching")
    return _DTYPES[name]
