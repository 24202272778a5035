"""native/quant_matmul.cpp: products over a GGUF's quantized blocks equal x @ W^T with W as gguf's own
dequantizer reads the blocks, and a row's result never depends on the rows beside it."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from conch.engine.backends.conch import native
from conch.engine.backends.conch.model.quantized import QUANT_TYPES, QuantizedMatrix
from tests.gguf_files import random_blocks


@pytest.fixture(scope="module")
def kernel():
    module = native.load("quant_matmul")
    if module is None:
        pytest.skip("no C++ compiler: the quantized kernels cannot be built here")
    return module


def _matrix(kernel, qtype: str, out: int = 96, K: int = 512, seed: int = 0):
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    blocks = random_blocks(qtype, out, K, scale=0.01, rng=np.random.default_rng(seed))
    reference = torch.from_numpy(dequantize(blocks, GGMLQuantizationType[qtype]).astype(np.float32))
    return QuantizedMatrix(kernel, torch.from_numpy(blocks), QUANT_TYPES[qtype], K), reference


@pytest.mark.parametrize("qtype", sorted(QUANT_TYPES))
def test_products_equal_the_float32_product_of_ggufs_dequantized_matrix(kernel, qtype):
    matrix, reference = _matrix(kernel, qtype)
    assert (matrix.dequantized() - reference).abs().max().item() <= 1e-6 * reference.abs().max().item()
    x = torch.randn(7, 512)
    want = (x.double() @ reference.double().T).float()
    got = matrix(x)
    assert (got - want).abs().max().item() <= 1e-4 * want.abs().max().item()
    got_bf16 = matrix(x.bfloat16()).float()                       # bf16 in and out: one rounding of the result
    assert (got_bf16 - want).abs().max().item() <= 1e-2 * want.abs().max().item()


@pytest.mark.parametrize("qtype", ["Q4_K", "Q8_0"])
def test_a_rows_result_is_the_same_alone_or_beside_others(kernel, qtype):
    matrix, _ = _matrix(kernel, qtype)
    x = torch.randn(33, 512).bfloat16()
    alone = matrix(x[:1])
    for batch in (x, torch.cat([x[:1], torch.randn(200, 512).bfloat16()])):
        assert torch.equal(matrix(batch)[:1], alone)
