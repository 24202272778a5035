"""KServe v2 tensors on the wire <-> numpy: JSON `data`, and raw bytes (the binary tensor data extension and
gRPC's raw contents). Raw BYTES tensors are each element's 4-byte little-endian length, then its bytes."""
from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from conch.engine.errors import InvalidRequest
from conch.engine.tensors.interface import NUMPY_DTYPES, datatype_of


def dtype_for(datatype: str, name: str):
    dtype = NUMPY_DTYPES.get(datatype)
    if dtype is None:
        raise InvalidRequest(f"input '{name}': unsupported datatype '{datatype}'", param=name)
    return dtype


MAX_RANK = 64                   # numpy's limit
MAX_ELEMENTS = 2 ** 32          # no body under the size limit holds more; bounds every product below int64


def check_shape(shape: Any, name: str) -> tuple[int, ...]:
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                              for d in shape):
        raise InvalidRequest(f"input '{name}': shape must be a list of non-negative integers", param=name)
    if len(shape) > MAX_RANK or math.prod(max(d, 1) for d in shape) > MAX_ELEMENTS:
        raise InvalidRequest(f"input '{name}': a shape has at most {MAX_RANK} dimensions and 2**32 elements",
                             param=name)
    return tuple(shape)


def json_shape(value: Any, name: str) -> tuple[int, ...]:
    """The shape of a JSON value given as a tensor (a scalar is [1]); nested lists must be rectangular."""
    if not isinstance(value, list):
        return (1,)
    shape: list[int] = []
    level = [value]
    while level and all(isinstance(v, list) for v in level):
        sizes = {len(v) for v in level}
        if len(sizes) > 1 or len(shape) == MAX_RANK:
            break
        shape.append(sizes.pop())
        level = [item for v in level for item in v]
    if any(isinstance(v, list) for v in level):             # ragged, or deeper than numpy allows
        raise InvalidRequest(f"input '{name}': nested lists must be rectangular, at most {MAX_RANK} deep",
                             param=name)
    return tuple(shape)


def from_json_data(data: Any, datatype: str, shape: tuple[int, ...], name: str) -> np.ndarray:
    flat = _flatten(data)
    if len(flat) != int(np.prod(shape, dtype=np.int64)):
        raise InvalidRequest(f"input '{name}': {len(flat)} values do not fill shape {list(shape)}", param=name)
    try:
        if datatype == "BYTES":
            return np.array([_to_bytes(v, name) for v in flat], dtype=np.object_).reshape(shape)
        if datatype == "BOOL" and not all(isinstance(v, bool) for v in flat):
            raise InvalidRequest(f"input '{name}': BOOL data must be true/false", param=name)
        if datatype != "BOOL" and any(isinstance(v, (bool, str)) or v is None for v in flat):
            raise InvalidRequest(f"input '{name}': {datatype} data must be numbers", param=name)
        return np.array(flat, dtype=dtype_for(datatype, name)).reshape(shape)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidRequest(f"input '{name}': data does not match datatype {datatype}: {exc}", param=name) from exc


def from_raw(raw: bytes, datatype: str, shape: tuple[int, ...], name: str) -> np.ndarray:
    if datatype == "BYTES":
        items = deserialize_bytes(raw, name)
        count = int(np.prod(shape, dtype=np.int64))
        if len(items) != count:
            raise InvalidRequest(f"input '{name}': {len(items)} elements do not fill shape {list(shape)}", param=name)
        return np.array(items, dtype=np.object_).reshape(shape)
    dtype = np.dtype(dtype_for(datatype, name))
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        raise InvalidRequest(f"input '{name}': {len(raw)} bytes of data, shape {list(shape)} of {datatype} needs "
                             f"{expected}", param=name)
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


def to_raw(array: np.ndarray) -> bytes:
    if datatype_of(array) == "BYTES":
        return serialize_bytes(array)
    return np.ascontiguousarray(array).tobytes()


def to_json_data(array: np.ndarray) -> list:
    if datatype_of(array) == "BYTES":
        return [_to_text(v) for v in array.reshape(-1)]
    return array.reshape(-1).tolist()


def serialize_bytes(array: np.ndarray) -> bytes:
    if array.size == 1:                     # a streamed response's one piece of text
        return _bytes_element(array.item())
    return b"".join(_bytes_element(item) for item in array.reshape(-1))


def _bytes_element(item: Any) -> bytes:
    value = item if isinstance(item, bytes) else str(item).encode()
    return len(value).to_bytes(4, "little") + value


def deserialize_bytes(raw: bytes, name: str) -> list[bytes]:
    items, offset = [], 0
    while offset < len(raw):
        if offset + 4 > len(raw):
            raise InvalidRequest(f"input '{name}': truncated BYTES element length", param=name)
        (length,) = struct.unpack_from("<I", raw, offset)
        offset += 4
        if offset + length > len(raw):
            raise InvalidRequest(f"input '{name}': BYTES element overruns the data", param=name)
        items.append(bytes(raw[offset:offset + length]))
        offset += length
    return items


def _flatten(data: Any) -> list:
    if not isinstance(data, list):
        return [data]
    out: list = []
    for item in data:
        out.extend(_flatten(item))
    return out


def _to_bytes(value: Any, name: str) -> bytes:
    if isinstance(value, str):
        return value.encode()
    raise InvalidRequest(f"input '{name}': BYTES data must be strings", param=name)


def _to_text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
