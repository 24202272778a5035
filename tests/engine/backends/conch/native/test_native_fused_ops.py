"""The fused elementwise kernels (native/fused_ops.cpp): the residual add and RMSNorm round as torch's bf16 add
and HF's LlamaRMSNorm do, SiLU x up as torch's F.silu(gate) * up, and each row alone as in its batch."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from tests.engine.backends.conch.native_modules import compiled



@pytest.fixture(scope="module")
def ops():
    return compiled("fused_ops")


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


def test_head_rms_norm_normalises_each_head_in_place_as_hf(ops):
    """Qwen3's q and k norms: each head of D values of a token's qkv row normed as HF's RMSNorm, the values
    (and the other heads) untouched, a row alone as in its batch."""
    H, G, D = 4, 2, 64
    qkv = _bf16(9, (H + 2 * G) * D, seed=7)
    wq, wk = ((torch.rand(D, generator=torch.Generator().manual_seed(s)) + 0.5).to(torch.bfloat16) for s in (8, 9))
    before = qkv.clone()
    ops.head_rms_norm(qkv, 0, H, D, wq, 1e-6)
    ops.head_rms_norm(qkv, H, G, D, wk, 1e-6)
    want_q = _hf_rms_norm(before[:, :H * D].view(9, H, D), wq, 1e-6).view(9, H * D)
    want_k = _hf_rms_norm(before[:, H * D:(H + G) * D].view(9, G, D), wk, 1e-6).view(9, G * D)
    for got, want in ((qkv[:, :H * D], want_q), (qkv[:, H * D:(H + G) * D], want_k)):
        assert (got == want).float().mean() > 0.999
        torch.testing.assert_close(got, want, atol=0.02, rtol=0.02)
    assert torch.equal(qkv[:, (H + G) * D:], before[:, (H + G) * D:])
    alone = before[4:5].clone()
    ops.head_rms_norm(alone, 0, H, D, wq, 1e-6)
    assert torch.equal(alone[0, :H * D], qkv[4, :H * D])
    with pytest.raises(RuntimeError, match="heads past the row"):
        ops.head_rms_norm(qkv, H, 2 * G + 1, D, wk, 1e-6)


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


def _torch_rope(qkv: torch.Tensor, rotation: torch.Tensor, positions: torch.Tensor, H: int, G: int, D: int):
    """llama.py's torch path: q/k pairs rotated by a float32 complex multiply, rounded to bf16."""
    T = qkv.shape[0]
    pairs = qkv[:, :(H + G) * D].float().reshape(T, H + G, D // 2, 2)
    turn = torch.view_as_complex(rotation[positions].unsqueeze(1).contiguous())
    qk = torch.view_as_real(torch.view_as_complex(pairs) * turn).view(T, H + G, D).to(torch.bfloat16)
    return qk[:, :H], qk[:, H:], qkv[:, (H + G) * D:].view(T, G, D)


def test_rope_store_rotates_as_torch_and_writes_the_rows(ops):
    H, G, D, T = 9, 3, 64, 21
    qkv = _bf16(T, (H + 2 * G) * D, seed=7)
    angles = torch.arange(300).unsqueeze(1) * torch.logspace(0, -4, D // 2).unsqueeze(0)
    rotation = torch.stack([angles.cos(), angles.sin()], dim=-1).float().contiguous()     # (P, D/2, 2)
    positions = torch.randint(0, 300, (T,), generator=torch.Generator().manual_seed(8))
    k, v = torch.zeros(4, G, 32, D, dtype=torch.bfloat16), torch.zeros(4, G, 32, D, dtype=torch.bfloat16)
    slots, columns = torch.randint(0, 4, (T,)), torch.randperm(32)[:T]                    # distinct cells
    rows = ((slots.unsqueeze(1) * G + torch.arange(G)) * 32 + columns.unsqueeze(1)).reshape(-1)
    q = ops.rope_store(qkv, rotation, positions, rows, k, v)
    want_q, want_k, want_v = _torch_rope(qkv, rotation, positions, H, G, D)
    assert q.shape == (T, H, D)
    assert (q == want_q).float().mean() > 0.999      # a fused multiply-add may round one element otherwise
    torch.testing.assert_close(q, want_q, atol=0.02, rtol=0.02)
    for t in range(T):
        torch.testing.assert_close(k[slots[t], :, columns[t]], want_k[t], atol=0.02, rtol=0.02)
        assert torch.equal(v[slots[t], :, columns[t]], want_v[t])
    assert torch.equal(ops.rope_store(qkv[5:6].contiguous(), rotation, positions[5:6], rows[15:18], k, v)[0], q[5])


def test_rope_store_refuses_what_is_out_of_range(ops):
    qkv, rotation = _bf16(1, 15 * 64, seed=9), torch.zeros(10, 32, 2)
    k = v = torch.zeros(1, 3, 8, 64, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="past the table"):
        ops.rope_store(qkv, rotation, torch.tensor([10]), torch.tensor([0, 8, 16]), k, v)
    with pytest.raises(RuntimeError, match="past the store"):
        ops.rope_store(qkv, rotation, torch.tensor([0]), torch.tensor([0, 8, 24]), k, v)
