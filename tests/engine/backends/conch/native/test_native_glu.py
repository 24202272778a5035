"""matmul_glu of the packed bf16 matmuls (narrow_matmul.cpp: AVX512-BF16; tile_matmul.cpp: AMX), an MLP's gate_up
product and its SiLU gate in one pass: fused_ops' silu_mul of the plain product's roundings, each row's bits its
own, and the layers' gate_up products taking it."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from conch.engine.backends.conch.kv.huge_pages import HugePageArena
from conch.engine.backends.conch.model.weights import Narrow, NarrowPacking, product
from tests.engine.backends.conch.native_modules import bf16, compiled


@pytest.fixture(scope="module", params=["narrow_matmul", "tile_matmul"])
def kernel(request):
    module = compiled(request.param)
    if not module.available():
        pytest.skip(f"{request.param}: no path on this CPU (narrow: AVX512-BF16; tile: AMX tiles)")
    return module


@pytest.mark.parametrize("rows", [1, 7, 12, 13, 40, 300])     # narrow: tiles of up to 12 rows; tile: of 16
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
    """A GLU row alone gives the bits it gets among 300 (tiles of every size the kernel has)."""
    x, packed = bf16(300, 576, seed=11), kernel.pack_glu(bf16(3072, 576, seed=12, scale=0.05))
    together = kernel.matmul_glu(x, packed)
    for row in (0, 11, 12, 15, 16, 33, 191, 192, 256, 299):
        assert torch.equal(kernel.matmul_glu(x[row:row + 1].contiguous(), packed)[0], together[row])


def test_an_mlp_gate_up_product_applies_its_gate(kernel):
    """weights.product(glu=True): a Narrow that `activates` (llama.py then skips silu_mul); a bias (no MLP here
    has one) keeps the plain product."""
    w, packing = bf16(2 * 64, 96, seed=13, scale=0.1), NarrowPacking(kernel, HugePageArena())
    gated = product(w, None, False, True, packing, glu=True)
    assert isinstance(gated, Narrow) and gated.activates
    x = bf16(5, 96, seed=14)
    assert torch.equal(gated(x), kernel.matmul_glu(x, kernel.pack_glu(w)))
    assert not product(w, bf16(128, seed=15), False, True, packing, glu=True).activates
