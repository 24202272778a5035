"""The AMX matmul (native/tile_matmul.cpp): a weight in the VNNI tile layout times any number of rows, as a float32
sum rounded once (within a bf16 step of torch's product), each row's bits independent of the row count and of
the rows beside it (full tiles of 16 rows, two tiles a step, a last partial tile)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from conch.engine.backends.conch.kv.huge_pages import HugePageArena
from conch.engine.backends.conch.model.weights import Narrow, NarrowPacking, product
from tests.engine.backends.conch.native_modules import assert_float32_product_rounded_once, bf16, compiled


@pytest.fixture(scope="module")
def kernel():
    module = compiled("tile_matmul")
    if not module.available():
        pytest.skip("this CPU (or this kernel's grant) has no AMX tiles")
    return module


@pytest.mark.parametrize(("rows", "out", "inner"), [(1, 960, 576), (2, 576, 1536), (17, 3072, 576), (33, 64, 96),
                                                    (50, 32, 32), (300, 96, 64)])
def test_matmul_is_the_float32_product_rounded_once(kernel, rows, out, inner):
    assert_float32_product_rounded_once(kernel, rows, out, inner)


def test_a_rows_bits_do_not_depend_on_its_neighbours(kernel):
    x, packed = bf16(300, 1536, seed=3), kernel.pack(bf16(576, 1536, seed=4, scale=0.05))
    together = kernel.matmul(x, packed)
    for row in (0, 5, 15, 16, 31, 32, 255, 256, 299):
        assert torch.equal(kernel.matmul(x[row:row + 1].contiguous(), packed)[0], together[row])


def test_shapes_it_cannot_lay_out_are_refused(kernel):
    assert kernel.fits(960, 576) and not kernel.fits(48, 576) and not kernel.fits(64, 48)
    with pytest.raises(RuntimeError, match="multiple"):
        kernel.pack(bf16(40, 64, seed=5))
    with pytest.raises(RuntimeError, match="packed"):
        kernel.matmul(bf16(1, 32, seed=6), kernel.pack(bf16(64, 64, seed=7)))
    assert kernel.matmul(bf16(0, 64, seed=8), kernel.pack(bf16(64, 64, seed=9))).shape == (0, 64)


def test_a_product_takes_it_where_it_fits(kernel):
    w, packing = bf16(96, 128, seed=8, scale=0.05), NarrowPacking(kernel, HugePageArena())
    fast = product(w, None, False, True, packing)
    assert isinstance(fast, Narrow)
    for rows in (1, 8, 40, 300):
        x = bf16(rows, 128, seed=rows)
        assert torch.equal(fast(x), kernel.matmul(x, kernel.pack(w)))
        torch.testing.assert_close(fast(x), F.linear(x, w), atol=0.05, rtol=0.02)


@pytest.mark.parametrize("rows", [1, 7, 40, 300])
def test_the_glu_product_is_the_product_then_silu_mul(kernel, rows):
    """matmul_glu: silu(x gate^T) * (x up^T) in one pass, with fused_ops' silu_mul roundings of the unfused
    product (its exponential another's: all but a rare element bit for bit, those within a bf16 step)."""
    w, x = bf16(2 * 96, 128, seed=10, scale=0.2), bf16(rows, 128, seed=rows)
    unfused = compiled("fused_ops").silu_mul(kernel.matmul(x, kernel.pack(w)))
    got = kernel.matmul_glu(x, kernel.pack_glu(w))
    assert got.shape == (rows, 96)
    assert (got == unfused).float().mean() > 0.99
    torch.testing.assert_close(got, unfused, atol=0.02, rtol=0.02)
    gate, up = F.linear(x.float(), w.float()).chunk(2, dim=-1)
    torch.testing.assert_close(got.float(), F.silu(gate) * up, atol=0.05, rtol=0.02)


def test_a_glu_rows_bits_do_not_depend_on_its_neighbours(kernel):
    x, packed = bf16(300, 576, seed=11), kernel.pack_glu(bf16(3072, 576, seed=12, scale=0.05))
    together = kernel.matmul_glu(x, packed)
    for row in (0, 15, 16, 33, 256, 299):
        assert torch.equal(kernel.matmul_glu(x[row:row + 1].contiguous(), packed)[0], together[row])


def test_an_mlp_gate_up_product_applies_its_gate(kernel):
    """weights.product(glu=True) on the AMX path: a Narrow that `activates` (llama.py then skips silu_mul); a
    bias (no MLP here has one) keeps the plain product."""
    w, packing = bf16(2 * 64, 96, seed=13, scale=0.1), NarrowPacking(kernel, HugePageArena())
    gated = product(w, None, False, True, packing, glu=True)
    assert isinstance(gated, Narrow) and gated.activates
    x = bf16(5, 96, seed=14)
    assert torch.equal(gated(x), kernel.matmul_glu(x, kernel.pack_glu(w)))
    assert not product(w, bf16(128, seed=15), False, True, packing, glu=True).activates
