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
