"""Triton's system shared memory extension: a client registers a POSIX shared memory region (what
tritonclient's `tritonclient.utils.shared_memory` creates under /dev/shm), then names it in place of an
input's data or as the place an output goes.

    register(name, key, offset, byte_size)   the region `key` (e.g. "/input_simple"), bytes offset..offset+size
    status([name]), unregister([name])       one region, or all of them

An input with parameters `shared_memory_region`, `shared_memory_byte_size` (and `shared_memory_offset`) is
read from the region as raw tensor bytes; a requested output with the same parameters is written into it and
its response entry carries those parameters and no data. A key is a single name in /dev/shm (no other file
can be opened through it); every range is checked against the region. CUDA shared memory needs a GPU:
its routes and RPCs answer that it is not supported.
"""
from __future__ import annotations

import mmap
import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from conch.engine.errors import InvalidRequest
from conch.gateway.kserve.codec import from_raw, to_raw

SHM_ROOT = "/dev/shm"
CUDA_REFUSAL = "CUDA shared memory is not supported by Conch (no CUDA device); use system shared memory"
SHM_PARAMS = ("shared_memory_region", "shared_memory_byte_size", "shared_memory_offset")


@dataclass(frozen=True)
class ShmReference:
    """An input's or output's place in a registered region."""

    region: str
    byte_size: int
    offset: int = 0

    @classmethod
    def from_parameters(cls, params: dict[str, Any], tensor: str) -> "ShmReference | None":
        if "shared_memory_region" not in params:
            return None
        size, offset = params.get("shared_memory_byte_size"), params.get("shared_memory_offset", 0)
        if not isinstance(size, int) or not isinstance(offset, int) or size < 0 or offset < 0:
            raise InvalidRequest(f"'{tensor}': shared_memory_byte_size (and shared_memory_offset) must be "
                                 f"non-negative integers", param=tensor)
        return cls(str(params["shared_memory_region"]), size, offset)

    def as_parameters(self) -> dict[str, Any]:
        return {"shared_memory_region": self.region, "shared_memory_byte_size": self.byte_size,
                **({"shared_memory_offset": self.offset} if self.offset else {})}


class _Region:
    def __init__(self, name: str, key: str, offset: int, byte_size: int) -> None:
        self.name, self.key, self.offset, self.byte_size = name, key, offset, byte_size
        fd = os.open(_path(key), os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if offset + byte_size > size:
                raise InvalidRequest(f"shared memory region '{name}': offset {offset} + byte_size {byte_size} "
                                     f"exceeds the {size} bytes of '{key}'", param="byte_size")
            self.map = mmap.mmap(fd, size)
        finally:
            os.close(fd)

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key, "offset": self.offset, "byte_size": self.byte_size}

    def span(self, ref: ShmReference, tensor: str) -> slice:
        if ref.offset + ref.byte_size > self.byte_size:
            raise InvalidRequest(f"'{tensor}': offset {ref.offset} + byte_size {ref.byte_size} exceeds shared "
                                 f"memory region '{self.name}' ({self.byte_size} bytes)", param=tensor)
        start = self.offset + ref.offset
        return slice(start, start + ref.byte_size)


class SystemSharedMemory:
    def __init__(self) -> None:
        self._regions: dict[str, _Region] = {}
        self._lock = threading.Lock()

    def register(self, name: str, key: str, offset: int = 0, byte_size: int = 0) -> None:
        if not name:
            raise InvalidRequest("a shared memory region needs a name", param="name")
        if name in self._regions:
            raise InvalidRequest(f"shared memory region '{name}' is already registered", param="name")
        if not isinstance(offset, int) or not isinstance(byte_size, int) or offset < 0 or byte_size <= 0:
            raise InvalidRequest("offset must be >= 0 and byte_size > 0", param="byte_size")
        try:
            region = _Region(name, key, offset, byte_size)
        except FileNotFoundError:
            raise InvalidRequest(f"shared memory key '{key}' does not exist", param="key") from None
        except (OSError, ValueError) as exc:
            raise InvalidRequest(f"shared memory key '{key}' cannot be mapped: {exc}", param="key") from None
        with self._lock:
            self._regions[name] = region

    def unregister(self, name: str | None = None) -> None:
        with self._lock:
            names = [name] if name else list(self._regions)
            for n in names:
                region = self._regions.pop(n, None)
                if region is not None:
                    region.map.close()

    def status(self, name: str | None = None) -> list[dict[str, Any]]:
        if name:
            return [self._region(name).status()]
        return [r.status() for r in self._regions.values()]

    def read(self, ref: ShmReference, datatype: str, shape: tuple[int, ...], tensor: str) -> np.ndarray:
        region = self._region(ref.region)
        return from_raw(bytes(region.map[region.span(ref, tensor)]), datatype, shape, tensor)

    def write(self, ref: ShmReference, array: np.ndarray, tensor: str) -> None:
        region = self._region(ref.region)
        span = region.span(ref, tensor)
        data = to_raw(array)
        if len(data) > ref.byte_size:
            raise InvalidRequest(f"output '{tensor}' needs {len(data)} bytes, its shared memory holds "
                                 f"{ref.byte_size}", param=tensor)
        region.map[span.start:span.start + len(data)] = data

    def _region(self, name: str) -> _Region:
        region = self._regions.get(name)
        if region is None:
            raise InvalidRequest(f"unable to find system shared memory region: '{name}'", param="name")
        return region


def _path(key: str) -> str:
    name = key[1:] if key.startswith("/") else key
    if not name or "/" in name or name in (".", ".."):
        raise InvalidRequest(f"shared memory key '{key}' must name one region in {SHM_ROOT}", param="key")
    return os.path.join(SHM_ROOT, name)
