"""Which product serves a model's matmuls (weights.py's `product`): one kernel path, chosen once at load.

  amx     native/tile_matmul.cpp: AMX tiles (TMUL), weights in the VNNI tile layout       bf16, a CPU with AMX
  avx512  native/narrow_matmul.cpp: AVX512-BF16 registers over up to 8 rows              bf16, AVX512-BF16
  onednn  oneDNN's linear over weights packed into its blocked layout                     any dtype oneDNN takes
  torch   aten's linear over the weights as loaded                                        any dtype

`CONCH_MATMUL_PATH` forces one (a path this CPU or build cannot run is refused by name at load); unset or
`auto`, the first of amx, avx512, onednn, torch that runs here serves. The native paths serve bf16 only: another
dtype gets onednn or torch whatever the switch. A matrix a native kernel cannot lay out (its shape) gets oneDNN.

Batch invariance: both native kernels give a row the same bits at any row count (each output one float32 sum
over `in` in a fixed order, whatever the rows beside it). oneDNN does not on an AMX CPU: rows 33..63 of a
product (among others) take another order than the same rows in a product of 32 or 64 (its lone-row guard,
weights.py's Dense, does not cover that); aten's linear is held to no order either."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from conch.engine.backends.conch import native
from conch.engine.backends.conch.model.weights import can_pack

ENV = "CONCH_MATMUL_PATH"
ORDER = ("amx", "avx512", "onednn", "torch")           # auto: the first that runs here
KERNELS = {"amx": "tile_matmul", "avx512": "narrow_matmul"}      # a native path's source in native/
FLAGS = ("amx_bf16", "amx_int8", "amx_tile", "avx512_bf16", "avx512_vnni", "avx512f", "avx2")


@dataclass(frozen=True)
class MatmulPath:
    name: str                   # one of ORDER
    kernel: Any = None          # a native path's compiled module (fits, pack, matmul), else None
    pack: bool = False          # oneDNN packs the weights the native kernel does not take


def _native(name: str) -> Any:
    kernel = native.load(KERNELS[name])
    return kernel if kernel is not None and kernel.available() else None


def find(name: str, dtype: torch.dtype) -> MatmulPath | None:
    """The path `name` for weights of `dtype`, or None where it cannot run here."""
    if name in KERNELS:
        kernel = _native(name) if dtype == torch.bfloat16 else None
        return None if kernel is None else MatmulPath(name, kernel, can_pack(dtype))
    if name == "onednn":
        return MatmulPath(name, None, True) if can_pack(dtype) else None
    return MatmulPath(name)


def choose(dtype: torch.dtype) -> MatmulPath:
    """The path for a model of `dtype`: CONCH_MATMUL_PATH's, or the first of ORDER that runs here."""
    forced = os.environ.get(ENV, "auto")
    if forced not in ("auto", *ORDER):
        raise ValueError(f"{ENV}={forced!r}: expected auto or one of {', '.join(ORDER)}")
    if forced == "auto" or (forced in KERNELS and dtype != torch.bfloat16):     # native paths: bf16 only
        return next(p for p in (find(n, dtype) for n in ORDER) if p is not None)
    path = find(forced, dtype)
    if path is None:
        raise ValueError(f"{ENV}={forced}: this CPU or build cannot run it (flags: {' '.join(cpu_flags())}; "
                         "a native path needs a C++ compiler and CONCH_NATIVE_KERNELS not 0)")
    return path


def cpu_flags() -> list[str]:
    """FLAGS this CPU has (Linux's /proc/cpuinfo); empty elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    have = set(next((line for line in text.splitlines() if line.startswith("flags")), "").split())
    return [f for f in FLAGS if f in have]
