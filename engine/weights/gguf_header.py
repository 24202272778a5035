"""A GGUF file's header in one pass over the memory-mapped file: its metadata and its tensor table, each tensor a
view of the file's bytes in the layout gguf's GGUFReader gives it (so gguf's dequantizer and the kernels read
it as they read a ReaderTensor), no tensor data read.

Why not gguf's GGUFReader: it builds a numpy view per element of every metadata array, seconds for a
vocabulary's tokens and merges (150k strings each), and a load asks for the header more than once. Here an
array of strings is walked, not read: its value is its element count (transformers' fast reader counts them
the same way, so one config builder serves both: gguf_config.py). Numeric arrays are lists."""
from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

_VERSIONS = (2, 3)               # v1 counted in 32 bits; no file in use still is one
_DEFAULT_ALIGNMENT = 32          # general.alignment when the file names none
# GGUFValueType number -> struct format of its fixed-size values (8: string and 9: array are walked)
_FORMATS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
# ggml types whose tensors gguf's reader gives as values, not as (rows, bytes) blocks
_VALUE_TYPES = {0: np.float32, 1: np.float16, 24: np.int8, 25: np.int16, 26: np.int32, 27: np.int64,
                28: np.float64}


@dataclass(frozen=True)
class GgufTensor:
    """One tensor as gguf's ReaderTensor has it (the fields the loaders read)."""
    name: str
    tensor_type: Any             # gguf.GGMLQuantizationType
    shape: tuple[int, ...]       # ggml's order: the fastest-moving dimension (a matrix's in_features) first
    data: np.ndarray             # read-only view of the mapped file: values (F32, F16...) shaped torch's way,
                                 # or (..., rows, bytes of a row) uint8 blocks for every other type


@dataclass(frozen=True)
class GgufHeader:
    metadata: dict[str, Any]     # key -> int / float / bool / str / list (numeric arrays) / int (a string
                                 # array's element count)
    tensors: tuple[GgufTensor, ...]
    blob: np.ndarray             # the whole file, read-only, over `mapping`
    mapping: mmap.mmap
    string_arrays: dict[str, int] = field(default_factory=dict)   # key of a string array -> its first
                                                                  # element's offset (`strings` reads it)

    def strings(self, key: str) -> list[str]:
        """The elements of the string array `key` (a vocabulary, a merge table), read off the map."""
        cursor = _Cursor(self.blob)
        cursor.at = self.string_arrays[key]
        return cursor.strings(self.metadata[key])

    def release(self, tensor: GgufTensor) -> None:
        """The mapped pages under `tensor` (one of `tensors`) dropped from this process's resident memory (a
        loader that copied it is done with them): read from the file again if touched later."""
        offset = tensor.data.__array_interface__["data"][0] - self.blob.__array_interface__["data"][0]
        if tensor.data.nbytes == 0 or not 0 <= offset <= self.blob.nbytes - tensor.data.nbytes:
            raise ValueError(f"tensor {tensor.name} is not a view of this file")
        start = offset // mmap.PAGESIZE * mmap.PAGESIZE
        self.mapping.madvise(mmap.MADV_DONTNEED, start, offset + tensor.data.nbytes - start)


class _Cursor:
    """Reads little-endian values off the mapped bytes from a moving offset."""

    def __init__(self, blob: np.ndarray) -> None:
        self.blob, self.bytes, self.at = blob, blob.data, 0
        self.strings_at: int | None = None        # the last value's first string, where it was a string array

    def take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from("<" + fmt, self.bytes, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        return self.strings(1)[0]

    def strings(self, count: int) -> list[str]:
        """`count` strings (u64 length, UTF-8 bytes) from the cursor on, each read off a slice of the map's
        memoryview (a numpy slice a string costs ~5x more: a vocabulary is 150k of them)."""
        out, data, at, unpack = [], self.bytes, self.at, struct.unpack_from
        for _ in range(count):
            (length,) = unpack("<Q", data, at)
            out.append(data[at + 8:at + 8 + length].tobytes().decode("utf-8", errors="replace"))
            at += 8 + length
        self.at = at
        return out

    def value(self, kind: int) -> Any:
        """The value of type `kind` at the cursor; of a string array, its count (its first element's offset
        in `strings_at`, else None)."""
        self.strings_at = None
        if kind in _FORMATS:
            return self.take(_FORMATS[kind])
        if kind == 8:
            return self.string()
        if kind != 9:
            raise ValueError(f"metadata value of unknown type {kind}")
        element, count = self.take("I"), self.take("Q")
        if element in _FORMATS:
            values = np.frombuffer(self.blob, "<" + _FORMATS[element], count, self.at)
            self.at += values.nbytes
            return values.tolist()
        if element != 8:
            raise ValueError(f"metadata array of element type {element}")
        self.strings_at = self.at
        for _ in range(count):                     # strings: walked, their count kept
            self.at += 8 + self.take("Q")
        return count


def read_header(path: Path) -> GgufHeader:
    """The header of the GGUF at `path`. ValueError for a file that is not GGUF v2/v3 or whose header does not
    parse; a tensor of a type gguf does not know keeps its number (check_loadable names it)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    with open(path, "rb") as file:
        mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)   # the map outlives the descriptor
    blob = np.frombuffer(mapping, dtype=np.uint8)
    if bytes(blob[:4]) != b"GGUF":
        raise ValueError("no GGUF magic")
    cursor = _Cursor(blob)
    cursor.at = 4
    version, tensor_count, kv_count = cursor.take("I"), cursor.take("Q"), cursor.take("Q")
    if version not in _VERSIONS:
        raise ValueError(f"GGUF version {version} (read: {_VERSIONS})")
    metadata, arrays = {}, {}
    for _ in range(kv_count):
        key = cursor.string()
        metadata[key] = cursor.value(cursor.take("I"))
        if cursor.strings_at is not None:
            arrays[key] = cursor.strings_at
    table = []
    for _ in range(tensor_count):
        name = cursor.string()
        dims = tuple(cursor.take("Q") for _ in range(cursor.take("I")))
        table.append((name, dims, cursor.take("I"), cursor.take("Q")))
    alignment = int(metadata.get("general.alignment", _DEFAULT_ALIGNMENT))
    start = -(-cursor.at // alignment) * alignment
    tensors = []
    for name, dims, number, offset in table:
        try:
            kind = GGMLQuantizationType(number)
        except ValueError:                         # a type gguf does not know: its number
            kind = number
        shape = tuple(reversed(dims))              # torch's order
        if number in _VALUE_TYPES:
            dtype, count = np.dtype(_VALUE_TYPES[number]), int(np.prod(dims))
        elif kind in GGML_QUANT_SIZES:
            block, size = GGML_QUANT_SIZES[kind]
            dtype, shape = np.dtype(np.uint8), (*shape[:-1], shape[-1] // block * size)
            count = int(np.prod(shape))
        else:                                      # unknown to gguf: no view (check_loadable refuses it)
            tensors.append(GgufTensor(name, kind, dims, np.empty(0, np.uint8)))
            continue
        view = blob[start + offset:start + offset + count * dtype.itemsize].view(dtype).reshape(shape)
        tensors.append(GgufTensor(name, kind, dims, view))
    return GgufHeader(metadata, tuple(tensors), blob, mapping, arrays)
