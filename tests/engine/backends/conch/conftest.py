"""Fixtures the own engine's tests share."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from conch.engine.backends.conch import native

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


@pytest.fixture(scope="module")
def quant_kernel():
    """native/quant_matmul, or the test skipped where it cannot be built."""
    module = native.load("quant_matmul")
    if module is None:
        pytest.skip("no C++ compiler: the quantized kernels cannot be built here")
    return module


def _anon_huge_kb() -> int:
    line = next(x for x in Path("/proc/self/smaps_rollup").read_text().splitlines() if x.startswith("AnonHugePages"))
    return int(line.split()[1])


@pytest.fixture
def huge_kb():
    """The process's AnonHugePages in kB, as a function; the test skipped where an arena is never collapsed into
    huge pages (huge_pages.py: Linux 6.1+'s MADV_COLLAPSE, transparent huge pages not `never`)."""
    release = tuple(int(x) for x in os.uname().release.split(".")[:2] if x.isdigit())
    if not THP.exists() or "[never]" in THP.read_text() or release < (6, 1):
        pytest.skip("no MADV_COLLAPSE here (Linux 6.1+, transparent huge pages not 'never')")
    return _anon_huge_kb
