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


def _huge_kb_at(address: int) -> int:
    """AnonHugePages in kB of the mapping of this process that holds `address` (/proc/self/smaps): one arena
    segment's, whatever other models' memory the process holds or frees meanwhile."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(None, 1)[0]
        if "-" in head and ":" not in head:                      # a mapping's first line: start-end perms ...
            start, end = (int(x, 16) for x in head.split("-"))
            inside = start <= address < end
        elif inside and line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    raise LookupError(f"no mapping holds {address:#x}")


@pytest.fixture
def huge_kb():
    """`huge_kb(tensor)`: AnonHugePages in kB of the mapping that holds the tensor's data; the test skipped where
    an arena is never collapsed into huge pages (huge_pages.py: Linux 6.1+'s MADV_COLLAPSE, transparent huge pages
    not `never`)."""
    release = tuple(int(x) for x in os.uname().release.split(".")[:2] if x.isdigit())
    if not THP.exists() or "[never]" in THP.read_text() or release < (6, 1):
        pytest.skip("no MADV_COLLAPSE here (Linux 6.1+, transparent huge pages not 'never')")
    return lambda tensor: _huge_kb_at(tensor.data_ptr())
