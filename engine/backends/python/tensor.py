"""pb_utils.Tensor: a named numpy array, with Triton's DLPack surface (from_dlpack / to_dlpack / is_cpu).

Conch runs python models on the CPU: every tensor is host memory, so `is_cpu()` is always true and DLPack
exchanges (torch.from_dlpack(tensor), Tensor.from_dlpack(name, torch_tensor)) share the buffer, not copy it.
BYTES tensors (numpy object arrays) have no DLPack form, as in Triton.
"""
from __future__ import annotations

from typing import Any

import numpy as np


class TritonModelException(Exception):
    """What Triton's pb_utils raises on a misuse inside a model (and what a model may raise itself)."""


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

    def is_cpu(self) -> bool:
        return True

    def shape(self) -> list[int]:
        return list(self._array.shape)

    @staticmethod
    def from_dlpack(name: str, value: Any) -> "Tensor":
        """From anything with `__dlpack__` (a torch tensor, a numpy array) or a raw DLPack capsule."""
        if hasattr(value, "__dlpack__"):
            return Tensor(name, np.from_dlpack(value))
        import torch.utils.dlpack

        return Tensor(name, torch.utils.dlpack.from_dlpack(value).numpy())

    def to_dlpack(self) -> Any:
        """A DLPack capsule over this tensor's buffer."""
        return self._dlpackable().__dlpack__()

    def __dlpack__(self, stream: Any = None) -> Any:
        return self._dlpackable().__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._dlpackable().__dlpack_device__()

    def _dlpackable(self) -> np.ndarray:
        if self._array.dtype == np.object_:
            raise TritonModelException(f"tensor '{self._name}': a BYTES tensor has no DLPack form")
        if not self._array.flags.writeable:           # a request's buffer: DLPack cannot mark it read-only
            self._array = self._array.copy()
        return np.ascontiguousarray(self._array)
