"""The huge-page arena (huge_pages.py): copies keep their values, shapes and dtypes, start on cache lines one
after another, land in small pages, and move into huge pages as collapse_some is called (Linux 6.1+'s
MADV_COLLAPSE): only the bytes in use, a growing arena's new bytes too, a freed arena's never."""
from __future__ import annotations

import gc

import torch

from conch.engine.backends.conch.kv.huge_pages import ALIGN, HugePageArena, collapse_some


def test_copies_keep_values_and_pack_one_after_another():
    arena = HugePageArena()
    a, b = torch.randn(3, 5).to(torch.bfloat16), torch.arange(7, dtype=torch.int64)
    ca, cb = arena.copy(a), arena.copy(b)
    assert torch.equal(ca, a) and torch.equal(cb, b) and ca.dtype == a.dtype and cb.shape == b.shape
    assert ca.data_ptr() % ALIGN == 0                          # a segment starts on a huge page
    assert cb.data_ptr() - ca.data_ptr() == 64                 # the next copy on the next cache line
    a.zero_()
    assert not torch.equal(ca, a)                              # a copy, not a view


def test_a_copy_larger_than_a_segment_gets_its_own(monkeypatch):
    monkeypatch.setattr("conch.engine.backends.conch.kv.huge_pages.SEGMENT", 4 << 20)
    arena = HugePageArena()
    small, big = arena.copy(torch.ones(10)), arena.copy(torch.ones(3 << 20))     # 12 MB > a 4 MB segment
    assert big.data_ptr() % ALIGN == 0 and torch.equal(big, torch.ones(3 << 20)) and small.sum() == 10


def _collapse_all() -> int:
    calls = 0
    while collapse_some():
        calls += 1
    return calls


def test_copies_land_in_small_pages_then_collapse_keeping_their_values(huge_kb):
    _collapse_all()
    values = torch.randn(16 << 20).to(torch.bfloat16)                                # 32 MB
    held = HugePageArena().copy(values)
    assert huge_kb(held) == 0                                    # faulted in as 4 KB pages
    address = held.data_ptr()
    assert _collapse_all() == 4                                  # 8 MB a call (no engine thread here)
    assert huge_kb(held) == 32 << 10 and torch.equal(held, values) and held.data_ptr() == address


def test_collapse_takes_only_the_bytes_in_use_and_a_growing_arena_again(huge_kb):
    _collapse_all()
    arena = HugePageArena()
    arena.reserve(64 << 20)
    first = arena.copy(torch.ones(3 << 20, dtype=torch.uint8))                     # 3 MB of 64 reserved
    assert _collapse_all() == 1
    assert huge_kb(first) == 4 << 10                                                # its two huge pages, no more
    second = arena.copy(torch.full((5 << 20,), 2, dtype=torch.uint8))               # the same segment grows
    assert _collapse_all() == 1
    assert huge_kb(first) == 8 << 10
    assert first.sum() == 3 << 20 and second.sum() == 10 << 20


def test_a_freed_arena_is_never_collapsed():
    _collapse_all()
    arena = HugePageArena()
    held = arena.copy(torch.ones(4 << 20, dtype=torch.uint8))
    del arena, held
    gc.collect()
    assert not collapse_some()
