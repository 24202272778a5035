"""native/quant_matmul.cpp: products over a GGUF's quantized blocks equal x @ W^T with W as gguf's own
dequantizer reads the blocks (float32 x), or with x as the int8 product quantizes it (bf16 x: per 32 values,
scale max|x| / 127, as llama.cpp quantizes activations), and a row's result never depends on the rows beside it."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from conch.engine.backends.conch.model.quantized import QUANT_TYPES, QuantizedMatrix
from tests.gguf_files import random_blocks


@pytest.fixture(scope="module")
def kernel(quant_kernel):
    return quant_kernel


def _matrix(kernel, qtype: str, out: int = 96, K: int = 512, seed: int = 0):
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    blocks = random_blocks(qtype, out, K, scale=0.01, rng=np.random.default_rng(seed))
    reference = torch.from_numpy(dequantize(blocks, GGMLQuantizationType[qtype]).astype(np.float32))
    return QuantizedMatrix.pack(kernel, torch.from_numpy(blocks), QUANT_TYPES[qtype], K), reference


def _int8_rows(x: torch.Tensor, block: int) -> torch.Tensor:
    """x (M, K) float32 as the int8 product reads it: each `block` values rounded to multiples of max|x| / 127
    (llama.cpp's blocks: 256 against K-quants, 32 otherwise)."""
    blocks = x.view(x.shape[0], -1, block)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    # an IEEE 127 / amax as the kernel divides: torch's `127.0 / amax` is amax.reciprocal() * 127, one rounding
    # more, which rounds a value near a tie of x * inverse the other way
    inverse = torch.where(amax > 0, torch.full_like(amax, 127.0).div(amax), torch.zeros_like(amax))
    return (torch.round(blocks * inverse) * (amax / 127.0)).view_as(x)


def _paths(kernel) -> list[str]:
    return ["float32"] + (["vnni"] if kernel.int8_available() else []) + (["amx"] if kernel.amx_available() else [])


def _close(got: torch.Tensor, want: torch.Tensor, rel: float) -> bool:
    return (got.double() - want).abs().max().item() <= rel * want.abs().max().item()


# K = 544 for the 32-value types: a last VNNI step of 32 values
@pytest.mark.parametrize("qtype", sorted(QUANT_TYPES))
def test_products_equal_the_product_of_ggufs_dequantized_matrix(kernel, qtype):
    K = 512 if QUANT_TYPES[qtype] >= 12 else 544
    matrix, reference = _matrix(kernel, qtype, K=K)
    assert (matrix.dequantized() - reference).abs().max().item() <= 1e-6 * reference.abs().max().item()
    x = torch.randn(37, K)                                        # AMX: two tiles of 16 rows, then 5 by VNNI
    want = x.double() @ reference.double().T
    assert _close(matrix(x), want, 1e-4)                          # float32 x: the float32 product
    for path in _paths(kernel):
        got = kernel.matmul_path(x, matrix.packed, matrix.qtype, K, matrix.out_features, path)
        exact = x if path == "float32" else _int8_rows(x, 256 if K == 512 else 32)   # what that product multiplies
        assert _close(got, exact.double() @ reference.double().T, 1e-5), path
    # bf16 x (the int8 product where built): within x's int8 rounding (<= max|x| / 254 per value) of the float one
    assert _close(matrix(x.bfloat16()), want, 2e-2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("qtype", ["Q4_K", "Q6_K", "Q8_0"])
def test_a_rows_result_is_the_same_alone_or_beside_others(kernel, qtype, dtype):
    matrix, _ = _matrix(kernel, qtype)
    x = torch.randn(33, 512).to(dtype)
    alone = matrix(x[:1])
    for batch in (x, torch.cat([x[:1], torch.randn(200, 512).to(dtype)]), torch.cat([x[5:12], x[:1]]), x[:2]):
        row = 0 if batch.shape[0] != 8 else 7                     # also the last row of a tile of 8
        assert torch.equal(matrix(batch)[row:row + 1], alone)


@pytest.mark.parametrize("qtype", ["Q4_K", "Q6_K", "Q8_0"])
def test_the_int8_products_give_the_same_bits(kernel, qtype):
    """VNNI's and AMX's int32 dots are exact and the float steps after them are one function: the same bits,
    so the product chosen for a row count never changes a row."""
    if not kernel.amx_available():
        pytest.skip("no AMX here: one int8 product")
    matrix, _ = _matrix(kernel, qtype, out=40)                     # a last panel of 8 columns
    x = torch.randn(48, 512).bfloat16()
    assert torch.equal(kernel.matmul_path(x, matrix.packed, matrix.qtype, 512, 40, "vnni"),
                       kernel.matmul_path(x, matrix.packed, matrix.qtype, 512, 40, "amx"))


@pytest.mark.parametrize("qtype", sorted(QUANT_TYPES))
def test_rows_picked_from_a_packed_matrix_are_those_rows(kernel, qtype):
    """rows(index) regroups packed columns across panels (a q/k matrix's RoPE pair order): W[index] exactly, and
    the product of the picked matrix is the picked columns of the product."""
    K = 512 if QUANT_TYPES[qtype] >= 12 else 544
    matrix, _ = _matrix(kernel, qtype, out=40, K=K)
    index = torch.tensor([39, 0, 17, 16, 5, 5, 33, 1, 20, 2, 3, 38, 4, 6, 7, 8, 9, 30, 31])   # 19: a part panel
    picked = matrix.rows(index)
    assert picked.out_features == 19 and torch.equal(picked.dequantized(), matrix.dequantized()[index])
    assert torch.equal(picked.dequantized_rows(torch.tensor([3, 18])), matrix.dequantized()[index[[3, 18]]])
    x = torch.randn(3, K).bfloat16()
    assert torch.equal(picked(x), matrix(x)[:, index])


def test_a_packed_matrix_of_the_wrong_shape_is_refused(kernel):
    matrix, _ = _matrix(kernel, "Q4_K", out=40)
    with pytest.raises(RuntimeError, match="packed must be"):
        kernel.matmul(torch.randn(1, 512), matrix.packed, matrix.qtype, 512, 64)
    with pytest.raises(RuntimeError, match="row 40 of 40"):
        matrix.rows(torch.tensor([40]))
    with pytest.raises(RuntimeError, match="packed must be"):                 # room of the wrong size
        kernel.rows(matrix.packed, matrix.qtype, 512, 40, torch.arange(3), torch.empty(1, 8, dtype=torch.uint8))


@pytest.mark.parametrize("qtype", ["Q4_K", "Q6_K", "Q8_0"])
def test_matrices_packed_into_an_arena_are_the_same_bytes_there(kernel, qtype):
    """pack and rows write into room the caller placed (the loader's huge-page arena): the same bytes as their
    own allocation, held in the arena's mapping."""
    from conch.engine.backends.conch.kv.huge_pages import HugePageArena

    arena = HugePageArena()
    blocks = torch.from_numpy(random_blocks(qtype, 40, 512, scale=0.01, rng=np.random.default_rng(3)))
    plain = QuantizedMatrix.pack(kernel, blocks, QUANT_TYPES[qtype], 512)
    placed = QuantizedMatrix.pack(kernel, blocks, QUANT_TYPES[qtype], 512, arena)
    index = torch.tensor([7, 0, 39, 16])
    assert torch.equal(placed.packed, plain.packed) and torch.equal(placed.rows(index, arena).packed,
                                                                    plain.rows(index).packed)
    mapping, base = arena._segments[0]
    start = placed.packed.data_ptr() - torch.frombuffer(mapping, dtype=torch.uint8).data_ptr()
    assert base <= start < base + arena._size


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_matrices_of_different_types_side_by_side_equal_each_alone(kernel, dtype):
    """matmul_parts (quantized.Stacked: q | k | v of a Q4_K_M file, Q4_K beside Q6_K; a 32-value type beside
    them) gives each matrix's columns the bits its own product gives them."""
    from conch.engine.backends.conch.model.quantized import Stacked

    parts = tuple(_matrix(kernel, q, out=n, seed=i)[0] for i, (q, n) in enumerate([("Q4_K", 40), ("Q6_K", 24),
                                                                                     ("Q8_0", 33)]))
    for rows in (1, 3, 37):
        x = torch.randn(rows, 512).to(dtype)
        alone = torch.cat([p(x) for p in parts], dim=-1)
        assert torch.equal(Stacked(parts)(x), alone)
        bias = torch.randn(97).to(dtype)
        assert torch.equal(Stacked(parts, bias)(x), alone + bias)


@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_K", "Q6_K"])
def test_pack_with_row_ids_and_pack_each_give_packs_bytes(kernel, qtype):
    blocks = torch.from_numpy(random_blocks(qtype, 40, 256, 0.1, np.random.default_rng(1)))
    ids = torch.randperm(40, generator=torch.Generator().manual_seed(2))[:33]
    t = QUANT_TYPES[qtype]
    want = kernel.pack(blocks[ids].contiguous(), t, 256)
    assert torch.equal(kernel.pack(blocks, t, 256, None, ids), want)
    into, plain = torch.zeros_like(want), torch.empty(tuple(kernel.packed_shape(t, 256, 40)), dtype=torch.uint8)
    jobs, taken = [(blocks, t, 256, into, ids), (blocks, t, 256, plain, None)], torch.tensor([1])
    kernel.pack_each(jobs, release_sources=False, next=taken)                # job 0 taken: left as it is
    assert torch.equal(plain, kernel.pack(blocks, t, 256)) and not torch.equal(into, want) and taken.item() == 3
    kernel.pack_each(jobs, release_sources=False, next=torch.tensor([0]))
    assert torch.equal(into, want)
    with pytest.raises(RuntimeError, match="row 40 of 40"):
        kernel.pack(blocks, t, 256, None, torch.tensor([0, 40]))
