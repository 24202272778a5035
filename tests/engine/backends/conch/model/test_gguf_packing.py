"""gguf_packing.py: a GGUF's matrices packed on their own thread, q / k in the flattened runner's RoPE order where it
serves (a llama file's rows as they lie, no gather; the forward takes them without a copy) or HF's; the HF forward
of either gives the same outputs."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from conch.engine.backends.conch.model.gguf_layers import build_quantized
from conch.engine.backends.conch.model.gguf_packing import Packing, _rows, file_to_hf_rows
from conch.engine.backends.conch.model.llama import LlamaForward
from conch.engine.backends.conch.model.quantized import QUANT_TYPES, QuantizedMatrix, file_blocks
from conch.engine.backends.conch.model.weights import Shape, pair_order, qkv_rows
from conch.engine.weights.gguf_file import read_gguf
from tests.gguf_files import small_llama, write_llama_gguf


@pytest.fixture(scope="module")
def kernel(quant_kernel):
    return quant_kernel


@pytest.fixture(scope="module")
def path(tmp_path_factory, kernel):
    model = small_llama(hidden=256, inter=512, init=0.1)       # 4 heads of 64, 2 kv heads
    return write_llama_gguf(model, tmp_path_factory.mktemp("packing") / "m.gguf", "Q4_K", vocabulary=False)


def _packed(path, kernel, flat: bool):
    return Packing(read_gguf(path), kernel, flat).result()


def test_a_llama_files_q_and_k_are_packed_as_they_lie_in_rope_order(path, kernel):
    info = read_gguf(path)
    packed = _packed(path, kernel, flat=True)
    for name, heads in (("blk.0.attn_q.weight", 4), ("blk.1.attn_k.weight", 2)):
        tensor = next(t for t in info.header.tensors if t.name == name)
        n = int(tensor.shape[1])
        assert torch.equal(packed[name].order, pair_order(n, heads, 64))
        plain = QuantizedMatrix.pack(kernel, file_blocks(tensor), QUANT_TYPES["Q4_K"], int(tensor.shape[0]))
        assert torch.equal(packed[name].matrix.packed, plain.packed)       # the file's own row order
    assert packed["blk.0.attn_v.weight"].order is None


def test_the_forward_takes_the_packed_q_and_k_without_a_copy(path, kernel):
    model = build_quantized(read_gguf(path), torch.bfloat16, kernel, hf=False)
    forward = LlamaForward(model)
    for block, layer in zip(model.model.layers, forward.layers, strict=True):
        a = block.self_attn
        assert layer.qkv.parts[0] is a.q_proj.matrix and layer.qkv.parts[1] is a.k_proj.matrix


def test_the_hf_forward_is_the_same_in_either_order(path, kernel):
    """The flattened runner's packing (q / k in pairs, the QuantLinear putting outputs back) against HF's order."""
    pairs = build_quantized(read_gguf(path), torch.float32, kernel, hf=False)
    hf = build_quantized(read_gguf(path), torch.float32, kernel, hf=True)
    x = torch.randn(5, 256)
    for proj in ("q_proj", "k_proj", "v_proj"):
        got = getattr(pairs.model.layers[1].self_attn, proj)(x)
        want = getattr(hf.model.layers[1].self_attn, proj)(x)
        assert torch.equal(got, want), proj
    assert hf.model.layers[1].self_attn.q_proj.order is None


def test_a_neox_files_q_rows_are_gathered_into_pairs():
    """qwen2 / qwen3 / gemma3 files hold HF's order: flat packs pair_order's rows; HF's order is the file's."""
    meta = {"qwen3.attention.head_count": 2, "qwen3.attention.head_count_kv": 1, "qwen3.rope.dimension_count": 8}
    info = SimpleNamespace(architecture="qwen3", header=SimpleNamespace(metadata=meta))
    q = SimpleNamespace(name="blk.3.attn_q.weight", shape=(32, 16))
    ids, order = _rows(q, info, flat=True)
    assert torch.equal(ids, pair_order(16, 2, 8)) and torch.equal(order, ids)
    assert _rows(q, info, flat=False) == (None, None)
    assert _rows(SimpleNamespace(name="blk.3.ffn_up.weight", shape=(32, 16)), info, flat=True) == (None, None)
    llama = SimpleNamespace(architecture="llama", header=SimpleNamespace(metadata={"llama.attention.head_count": 2}))
    ids, order = _rows(q, llama, flat=False)
    assert torch.equal(ids, file_to_hf_rows(16, 2)) and order is None
    k = SimpleNamespace(name="blk.0.attn_k.weight", shape=(32, 16))       # no head_count_kv: heads as q's
    assert torch.equal(_rows(k, llama, flat=False)[0], file_to_hf_rows(16, 2))


def test_a_phi3_files_fused_qkv_is_gathered_section_by_section():
    """attn_qkv (q | k | v, HF's order in the file): q and k each in pairs over the rotated dims, v as it lies,
    the order weights.py's fused qkv holds (so the forward takes the packed matrix without a copy)."""
    meta = {"phi3.attention.head_count": 2, "phi3.attention.head_count_kv": 1, "phi3.rope.dimension_count": 6}
    info = SimpleNamespace(architecture="phi3", header=SimpleNamespace(metadata=meta))
    qkv = SimpleNamespace(name="blk.0.attn_qkv.weight", shape=(32, 32))        # (2 + 1 + 1) heads of 8 dims
    ids, order = _rows(qkv, info, flat=True)
    assert torch.equal(order, qkv_rows(Shape(2, 1, 8, 6))) and torch.equal(ids, order)
    assert torch.equal(order[24:], torch.arange(24, 32))                        # v
    assert _rows(qkv, info, flat=False) == (None, None)
