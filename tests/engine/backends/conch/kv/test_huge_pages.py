"""The huge-page arena (huge_pages.py): copies keep their values, shapes and dtypes, start on cache lines one
after another, and land in huge pages where Linux offers them (madvise mode)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conch.engine.backends.conch.kv.huge_pages import ALIGN, HugePageArena

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _huge_kb() -> int:
    line = next(x for x in Path("/proc/self/smaps_rollup").read_text().splitlines() if x.startswith("AnonHugePages"))
    return int(line.split()[1])


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


@pytest.mark.skipif(not THP.exists() or "[never]" in THP.read_text(), reason="no transparent huge pages here")
def test_copies_land_in_huge_pages():
    before = _huge_kb()
    held = HugePageArena().copy(torch.ones(16 << 20, dtype=torch.bfloat16))      # 32 MB
    assert _huge_kb() - before >= 16 << 10 and held.sum() == 16 << 20             # most of it in 2 MB pages
