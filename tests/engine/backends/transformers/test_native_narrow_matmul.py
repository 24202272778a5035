"""The narrow matmul (native/narrow_matmul.cpp): a few rows times a weight in its streaming layout, as a float32
sum rounded once (within a bf16 step of torch's product), each row's bits independent of the rows beside it,
and the layers' Dense taking it for up to NARROW_ROWS rows, or for every product where it must be batch-invariant."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.backends.transformers import native
from engine.backends.transformers.huge_pages import HugePageArena
from engine.backends.transformers.weights import NARROW_ROWS, Dense, NarrowPacking


@pytest.fixture(scope="module")
def kernel():
    module = native.load("narrow_matmul")
    assert module is not None                       # a C++ compiler and ninja come with the repo's setup
    if not module.available():
        pytest.skip("this CPU has no AVX512-BF16: oneDNN serves every product")
    return module


def _bf16(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale).to(torch.bfloat16)


@pytest.mark.parametrize(("rows", "out", "inner"), [(1, 960, 576), (2, 576, 1536), (5, 3072, 576), (9, 64, 96),
                                                    (50, 40, 64)])
def test_matmul_is_the_float32_product_rounded_once(kernel, rows, out, inner):
    x, w = _bf16(rows, inner, seed=0), _bf16(out, inner, seed=1, scale=0.05)
    bias = _bf16(out, seed=2)
    want = (x.float() @ w.float().T + bias.float()).to(torch.bfloat16)
    got = kernel.matmul(x, kernel.pack(w), bias.float())
    assert got.shape == (rows, out)
    assert (got == want).float().mean() > 0.99      # float32 sums in another order may round a few elements
    torch.testing.assert_close(got, want, atol=0.02, rtol=0.02)
    torch.testing.assert_close(kernel.matmul(x, kernel.pack(w)), F.linear(x, w), atol=0.05, rtol=0.02)


def test_a_rows_bits_do_not_depend_on_its_neighbours(kernel):
    x, packed = _bf16(13, 1536, seed=3), kernel.pack(_bf16(576, 1536, seed=4, scale=0.05))
    together = kernel.matmul(x, packed)
    for row in range(13):
        assert torch.equal(kernel.matmul(x[row:row + 1].contiguous(), packed)[0], together[row])


def test_shapes_it_cannot_lay_out_are_refused(kernel):
    assert kernel.fits(576, 1536) and not kernel.fits(577, 1536) and not kernel.fits(576, 1530)
    with pytest.raises(RuntimeError, match="multiple"):
        kernel.pack(_bf16(12, 64, seed=5))
    with pytest.raises(RuntimeError, match="packed"):
        kernel.matmul(_bf16(1, 32, seed=6), kernel.pack(_bf16(8, 64, seed=7)))


def test_dense_takes_it_for_few_rows_or_for_all_when_batch_invariant(kernel):
    w, packing = _bf16(64, 128, seed=8, scale=0.05), NarrowPacking(kernel, HugePageArena())
    plain, invariant = Dense.of(w, None, False, True, packing), Dense.of(w, None, False, False, packing)
    assert Dense.of(w.float(), None, False, True, packing).narrow is None      # bf16 only
    for rows in (1, NARROW_ROWS, NARROW_ROWS + 1, 40):
        x = _bf16(rows, 128, seed=rows)
        torch.testing.assert_close(plain(x), F.linear(x, w), atol=0.05, rtol=0.02)
        assert torch.equal(invariant(x), kernel.matmul(x, kernel.pack(w)))     # every product: rows independent
    x = _bf16(NARROW_ROWS, 128, seed=9)
    assert torch.equal(plain(x), kernel.matmul(x, kernel.pack(w)))
