"""The fused elementwise kernels (native/fused_ops.cpp): the residual add and RMSNorm round as torch's bf16 add
and HF's LlamaRMSNorm do, SiLU x up as torch's F.silu(gate) * up, and each row alone as in its batch."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.backends.transformers import native


@pytest.fixture(scope="module")
def ops():
    module = native.load("fused_ops")
    assert module is not None                       # a C++ compiler and ninja come with the repo's setup
    return module


def _bf16(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def _hf_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm: float32 statistics, normalised x rounded to the dtype, then the weight."""
    h = x.float()
    return weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def test_add_rms_norm_updates_the_residual_and_normalises_as_hf(ops):
    x, delta = _bf16(37, 576, seed=0), _bf16(37, 576, seed=1)
    weight = (torch.rand(576, generator=torch.Generator().manual_seed(2)) + 0.5).to(torch.bfloat16)
    want_x = x + delta
    out = ops.add_rms_norm(x, delta, weight, 1e-5)
    assert torch.equal(x, want_x)                   # in place, rounded as torch's bf16 add
    want = _hf_rms_norm(want_x, weight, 1e-5)
    assert (out == want).float().mean() > 0.999     # float32 sums in another order may round one element
    torch.testing.assert_close(out, want, atol=0.02, rtol=0.02)
    for row in (0, 17, 36):                         # a row alone: bit for bit what it was in the batch
        alone = want_x[row:row + 1].clone()
        assert torch.equal(ops.add_rms_norm(alone, torch.zeros_like(alone), weight, 1e-5)[0], out[row])


def test_silu_mul_equals_torch(ops):
    h = _bf16(45, 2 * 1536, seed=3)
    gate, up = h.chunk(2, dim=-1)
    out = ops.silu_mul(h)
    assert out.shape == (45, 1536) and torch.equal(out, F.silu(gate) * up)
    assert torch.equal(ops.silu_mul(h[7:8].contiguous())[0], out[7])


def test_shapes_and_dtypes_are_checked(ops):
    x = _bf16(4, 64, seed=4)
    with pytest.raises(RuntimeError, match="differ in shape"):
        ops.add_rms_norm(x, _bf16(4, 32, seed=5), torch.ones(64, dtype=torch.bfloat16), 1e-5)
    with pytest.raises(RuntimeError, match="bf16"):
        ops.add_rms_norm(x.float(), x.float(), torch.ones(64), 1e-5)
    with pytest.raises(RuntimeError, match="2 x intermediate"):
        ops.silu_mul(_bf16(4, 63, seed=6))
