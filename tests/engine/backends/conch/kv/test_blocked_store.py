"""The slot store's blocked layout (slot_store.py, Layout): the native kernels read it in place and compute what
they compute over a plain store bit for bit; rope_store writes there; growth, the prefix cache's copies in and
out and a fresh store's zeros keep every stored token's K/V."""
from __future__ import annotations

import pytest
import torch

from conch.engine.backends.conch.kv.slot_store import BLOCK, SlotKVStore, StorePolicy, _from_blocked, _to_blocked
from tests.engine.backends.conch.native_modules import compiled

G, D, H, CAP = 3, 64, 9, 256


class _Cell:
    computed = 0


@pytest.fixture(scope="module")
def kernels():
    return compiled("prefill_attention", vector=True), compiled("fused_ops")


def _bf16(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def _blocked_copy(k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A plain (S, G, C, D) store's contents in the blocked layout, region by region."""
    kb, vb = torch.empty_like(k), torch.empty_like(v)
    for s in range(k.shape[0]):
        kb[s], vb[s] = _to_blocked(k[s], v[s])
    return kb, vb


def test_to_and_from_blocked_round_trip_and_pad_with_zeros():
    k, v = _bf16(G, 100, D, seed=0), _bf16(G, 100, D, seed=1)
    kb, vb = _to_blocked(k, v)
    assert kb.shape == (G, 128, D) and kb.is_contiguous()
    back_k, back_v = _from_blocked(kb, vb, 100)
    assert torch.equal(back_k, k) and torch.equal(back_v, v)
    pad_k, pad_v = _from_blocked(kb, vb, 128)
    assert not pad_k[:, 100:].any() and not pad_v[:, 100:].any()
    # the layout the kernel reads: key (c, d) at [c / 64][d / 2][c % 64][d % 2], value at [c / 64][c % 64 / 2][d][c % 2]
    c, d = 70, 13
    assert kb[0].flatten()[(c // 64) * 64 * D + (d // 2) * 128 + (c % 64) * 2 + d % 2] == k[0, c, d]
    assert vb[0].flatten()[(c // 64) * 64 * D + ((c % 64) // 2) * 2 * D + d * 2 + c % 2] == v[0, c, d]


def test_rope_store_writes_the_blocked_layout(kernels):
    _, fused = kernels
    T = 40
    qkv, rotation = _bf16(T, (H + 2 * G) * D, seed=2), torch.randn(CAP, D // 2, 2)
    positions = torch.randperm(CAP)[:T]
    store = SlotKVStore(1, G, D, torch.bfloat16, 2**30, 2, StorePolicy.RESERVED, blocked=True)
    store.admit(_Cell(), CAP)
    rows = store.rows(torch.zeros(T, dtype=torch.long), positions)
    plain_k, plain_v = torch.zeros(1, G, CAP, D, dtype=torch.bfloat16), torch.zeros(1, G, CAP, D, dtype=torch.bfloat16)
    q_plain = fused.rope_store(qkv, rotation, positions, rows, plain_k, plain_v)
    q_blocked = fused.rope_store(qkv, rotation, positions, rows, store.k[0], store.v[0], True)
    assert torch.equal(q_plain, q_blocked)
    k, v = _from_blocked(store.k[0][0], store.v[0][0], CAP)
    assert torch.equal(k, plain_k[0]) and torch.equal(v, plain_v[0])


@pytest.mark.parametrize(("start", "n"), [(0, 150), (130, 40), (63, 1)])
def test_prefill_attention_reads_a_blocked_store_as_it_reads_a_plain_one(kernels, start, n):
    prefill, _ = kernels
    k, v = _bf16(2, G, CAP, D, seed=3), _bf16(2, G, CAP, D, seed=4)
    kb, vb = _blocked_copy(k, v)
    q = _bf16(n, H, D, seed=5)
    plain, blocked = torch.empty_like(q), torch.empty_like(q)
    prefill.prefill_attention(q, k, v, 1, start, D ** -0.5, plain)
    prefill.prefill_attention(q, kb, vb, 1, start, D ** -0.5, blocked, True)
    assert torch.equal(plain, blocked)


def test_attention_rows_read_a_blocked_store_as_they_read_a_plain_one(kernels):
    prefill, _ = kernels
    k, v = _bf16(4, G, CAP, D, seed=6), _bf16(4, G, CAP, D, seed=7)
    kb, vb = _blocked_copy(k, v)
    q = _bf16(5, H, D, seed=8)
    slots, positions = torch.tensor([0, 1, 2, 3, 1]), torch.tensor([0, 63, 64, 200, 255])
    plain, blocked = torch.empty_like(q), torch.empty_like(q)
    prefill.attention_rows(q, k, v, slots, positions, D ** -0.5, plain)
    prefill.attention_rows(q, kb, vb, slots, positions, D ** -0.5, blocked, True)
    assert torch.equal(plain, blocked)


def test_growth_and_the_prefix_copies_keep_the_tokens():
    store = SlotKVStore(2, G, D, torch.bfloat16, 2**30, 2, StorePolicy.RESERVED, blocked=True)
    assert not store._empty(2, CAP).any()                          # zeros from the OS, never leftovers
    cell = _Cell()
    slot = store.admit(cell, 100)
    head = [(_bf16(1, G, 90, D, seed=10 + i), _bf16(1, G, 90, D, seed=20 + i)) for i in range(2)]
    store.load_prefix(slot, head)
    assert cell.computed == 90
    for (k, v), (hk, hv) in zip(store.head(slot, 90), head, strict=True):
        assert torch.equal(k, hk) and torch.equal(v, hv)
    store._grow(2, 2 * CAP)                                        # copies whole blocks of the running slot
    assert store.capacity == 2 * CAP and store.k[0].shape[2] % BLOCK == 0
    for (k, v), (hk, hv) in zip(store.head(slot, 90), head, strict=True):
        assert torch.equal(k, hk) and torch.equal(v, hv)
    with pytest.raises(AssertionError, match="rope_store"):
        store.write(0, torch.tensor([0]), torch.zeros(1, G, D), torch.zeros(1, G, D))
