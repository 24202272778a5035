"""Triton's `model_warmup`: samples run through a model once it is loaded, before it is marked ready.

    model_warmup [{ name: "s", batch_size: 2, count: 3,
                    inputs { key: "X" value: { data_type: TYPE_FP32, dims: [4], zero_data: true } } }]

Each sample runs `count` times (at least once). A model with `max_batch_size > 0` gets a leading batch
dimension of `batch_size` (at least 1). An input's data is zeros, random values, or the raw bytes of a file
in the model's `warmup/` folder (BYTES: Triton's serialization, each element a 4-byte little-endian length
and its bytes). A sample that fails fails the load.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from conch.engine.errors import InvalidRequest
from conch.engine.repository.specs import DATATYPES

_NUMPY = {"BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
          "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "FP16": np.float16,
          "FP32": np.float32, "FP64": np.float64}


@dataclass(frozen=True)
class WarmupInput:
    name: str
    datatype: str               # KServe v2 names (BYTES for TYPE_STRING)
    dims: tuple[int, ...]
    source: str                 # zero | random | file
    file: str = ""

    def array(self, batch: int | None, folder: Path | None) -> np.ndarray:
        shape = ((batch,) if batch is not None else ()) + self.dims
        if self.source == "file":
            return _from_file(self, shape, folder)
        if self.datatype == "BYTES":
            fill = b"" if self.source == "zero" else b"warmup"
            return np.full(shape, fill, dtype=np.object_)
        dtype = _NUMPY[self.datatype]
        if self.source == "zero":
            return np.zeros(shape, dtype=dtype)
        rng = np.random.default_rng(0)
        if dtype == np.bool_:
            return rng.integers(0, 2, shape).astype(np.bool_)
        if np.issubdtype(dtype, np.integer):
            return rng.integers(0, 8, shape).astype(dtype)
        return rng.random(shape).astype(dtype)


@dataclass(frozen=True)
class WarmupSample:
    name: str
    batch_size: int
    count: int
    inputs: tuple[WarmupInput, ...]

    def tensors(self, batched: bool, folder: Path | None) -> dict[str, np.ndarray]:
        batch = max(1, self.batch_size) if batched else None
        return {i.name: i.array(batch, folder) for i in self.inputs}


def warmup_samples(data: Any, model: str) -> tuple[WarmupSample, ...]:
    """Samples from Triton's message as a dict (or config.yaml's same keys)."""
    samples = []
    for item in data or ():
        if not isinstance(item, dict) or not isinstance(item.get("inputs", {}), dict):
            raise InvalidRequest(f"model '{model}': model_warmup entries need named inputs", param="model_warmup")
        inputs = tuple(_input(model, name, spec) for name, spec in item.get("inputs", {}).items())
        samples.append(WarmupSample(str(item.get("name", "")), int(item.get("batch_size", 0)),
                                    max(1, int(item.get("count", 1))), inputs))
    return tuple(samples)


def _input(model: str, name: str, spec: dict[str, Any]) -> WarmupInput:
    datatype = str(spec.get("data_type", "")).removeprefix("TYPE_")
    datatype = "BYTES" if datatype == "STRING" else datatype
    if datatype not in DATATYPES or datatype == "BF16":
        raise InvalidRequest(f"model '{model}': model_warmup input '{name}' has no usable data_type",
                             param="model_warmup")
    sources = [s for s in ("zero_data", "random_data", "input_data_file") if spec.get(s)]
    if len(sources) != 1:
        raise InvalidRequest(f"model '{model}': model_warmup input '{name}' needs exactly one of zero_data, "
                             f"random_data, input_data_file", param="model_warmup")
    source = {"zero_data": "zero", "random_data": "random", "input_data_file": "file"}[sources[0]]
    file = str(spec.get("input_data_file", ""))
    if source == "file" and (Path(file).is_absolute() or ".." in Path(file).parts):
        raise InvalidRequest(f"model '{model}': model_warmup input_data_file must name a file in the model's "
                             f"warmup/ folder", param="model_warmup")
    return WarmupInput(name, datatype, tuple(int(d) for d in spec.get("dims", ())), source, file)


def _from_file(spec: WarmupInput, shape: tuple[int, ...], folder: Path | None) -> np.ndarray:
    path = (folder / "warmup" / spec.file) if folder is not None else None
    if path is None or not path.is_file():
        raise InvalidRequest(f"model_warmup input '{spec.name}': warmup/{spec.file} does not exist",
                             param="model_warmup")
    raw = path.read_bytes()
    size = int(np.prod(shape, dtype=np.int64))
    if spec.datatype != "BYTES":
        if len(raw) < size * np.dtype(_NUMPY[spec.datatype]).itemsize:
            raise InvalidRequest(f"model_warmup input '{spec.name}': warmup/{spec.file} is shorter than the "
                                 f"shape {list(shape)} needs", param="model_warmup")
        return np.frombuffer(raw, dtype=_NUMPY[spec.datatype], count=size).reshape(shape).copy()
    items: list[bytes] = []
    offset = 0
    while offset + 4 <= len(raw) and len(items) < size:
        (length,) = struct.unpack_from("<I", raw, offset)
        items.append(raw[offset + 4: offset + 4 + length])
        offset += 4 + length
    if len(items) != size:
        raise InvalidRequest(f"model_warmup input '{spec.name}': warmup/{spec.file} holds {len(items)} "
                             f"strings, the shape needs {size}", param="model_warmup")
    return np.array(items, dtype=np.object_).reshape(shape)
