"""The narrow matmul (native/narrow_matmul.cpp): a few rows times a weight in its streaming layout, as a float32
sum rounded once (within a bf16 step of torch's product), each row's bits independent of the rows beside it,
and the layers' products taking it wherever the weight's shape and dtype fit."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from conch.engine.backends.conch.kv.huge_pages import HugePageArena
from conch.engine.backends.conch.model.weights import Dense, Narrow, NarrowPacking, product
from tests.engine.backends.conch.native_modules import assert_float32_product_rounded_once, bf16, compiled


@pytest.fixture(scope="module")
def kernel():
    return compiled("narrow_matmul", vector=True)         # without AVX512-BF16 oneDNN serves every product


@pytest.mark.parametrize(("rows", "out", "inner"), [(1, 960, 576), (2, 576, 1536), (5, 3072, 576), (9, 64, 96),
                                                    (7, 128, 6), (50, 192, 64), (200, 64, 130), (1, 112, 64),
                                                    (3, 144, 32), (4, 80, 128), (12, 16, 64)])
def test_matmul_is_the_float32_product_rounded_once(kernel, rows, out, inner):
    assert_float32_product_rounded_once(kernel, rows, out, inner)


@pytest.mark.parametrize("out", [576, 592, 608])     # groups of 48 columns, and a last one of 16 or 32
def test_a_rows_bits_do_not_depend_on_its_neighbours(kernel, out):
    """A row alone, among 3 or 4 (a tile of that many rows) and among 113 (tiles of 8 and a last of 1) gives
    the same bits."""
    x, packed = bf16(113, 1536, seed=3), kernel.pack(bf16(out, 1536, seed=4, scale=0.05))
    together = kernel.matmul(x, packed)
    for lo, hi in ((0, 3), (5, 9)):
        assert torch.equal(kernel.matmul(x[lo:hi].contiguous(), packed), together[lo:hi])
    for row in (0, 5, 6, 7, 8, 95, 96, 112):
        assert torch.equal(kernel.matmul(x[row:row + 1].contiguous(), packed)[0], together[row])


def test_shapes_it_cannot_lay_out_are_refused(kernel):
    assert kernel.fits(576, 1536) and not kernel.fits(600, 1536) and not kernel.fits(576, 1531)
    with pytest.raises(RuntimeError, match="multiple"):
        kernel.pack(bf16(40, 64, seed=5))
    with pytest.raises(RuntimeError, match="packed"):
        kernel.matmul(bf16(1, 32, seed=6), kernel.pack(bf16(64, 64, seed=7)))


def test_a_product_takes_it_where_it_fits(kernel):
    w, packing = bf16(64, 128, seed=8, scale=0.05), NarrowPacking(kernel, HugePageArena())
    fast = product(w, None, False, True, packing)
    assert isinstance(fast, Narrow)
    assert isinstance(product(w.float(), None, False, True, packing), Dense)             # bf16 only
    assert isinstance(product(w[:40], None, False, True, packing), Dense)                # out not a multiple of 16
    assert isinstance(product(w, None, False, True, None), Dense)                        # no kernel here
    for rows in (1, 8, 40, 300):
        x = bf16(rows, 128, seed=rows)
        assert torch.equal(fast(x), kernel.matmul(x, kernel.pack(w)))
        torch.testing.assert_close(fast(x), F.linear(x, w), atol=0.05, rtol=0.02)
