"""The compiled native kernels (engine/backends/conch/native/) as the kernel tests load them, and the checks
the packed bf16 matmuls (narrow_matmul.cpp, tile_matmul.cpp) share."""
from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from conch.engine.backends.conch import native


def compiled(name: str, vector: bool = False) -> Any:
    """native/<name>.cpp's module: it must build (a C++ compiler and ninja come with the repo's setup). With
    `vector`, the test is skipped on a CPU without AVX512-BF16, where the module has no path to test."""
    module = native.load(name)
    assert module is not None
    if vector and not module.available():
        pytest.skip("this CPU has no AVX512-BF16")
    return module


def bf16(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    """A seeded normal tensor times `scale`, in bf16."""
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale).to(torch.bfloat16)


def assert_float32_product_rounded_once(kernel: Any, rows: int, out: int, inner: int) -> None:
    """A packed bf16 matmul's (narrow_matmul.cpp, tile_matmul.cpp) x @ W^T + bias: the float32 product rounded once
    to bf16 (all but a few elements bit for bit; float32 sums in another order may round a few otherwise), and
    within a bf16 step of torch's bf16 product without the bias."""
    x, w = bf16(rows, inner, seed=0), bf16(out, inner, seed=1, scale=0.05)
    bias = bf16(out, seed=2)
    want = (x.float() @ w.float().T + bias.float()).to(torch.bfloat16)
    got = kernel.matmul(x, kernel.pack(w), bias.float())
    assert got.shape == (rows, out)
    assert (got == want).float().mean() > 0.99
    torch.testing.assert_close(got, want, atol=0.02, rtol=0.02)
    torch.testing.assert_close(kernel.matmul(x, kernel.pack(w)), F.linear(x, w), atol=0.05, rtol=0.02)

