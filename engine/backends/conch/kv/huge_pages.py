"""Weights in transparent huge pages: the memory a decode step streams, laid out one after another.

Why: a decode step reads every weight once. In 4 KB pages that is a TLB miss every 4 KB, and under a
hypervisor each miss walks two page tables, so weights stream markedly faster from 2 MB pages (the figures:
docs/performance-journal.md, "Figures once in module docstrings").
Linux gives huge pages to anonymous memory marked MADV_HUGEPAGE before it is first touched (the default
`madvise` mode of /sys/kernel/mm/transparent_hugepage/enabled); elsewhere the arena still works, in small pages.

Invariant: a copy is never moved or freed while the arena lives (the tensors view its segments).
"""
from __future__ import annotations

import ctypes
import math
import mmap

import torch

ALIGN = 2 << 20              # a huge page
SEGMENT = 256 << 20          # bytes mapped at a time (reserved, not touched, until a copy lands there)
LINE = 64                    # copies start on a cache line


def anonymous(size: int, huge: bool) -> mmap.mmap:
    """`size` bytes of private anonymous memory: zeros, each page faulted in on first touch, never another
    allocation's leftovers; `huge`: marked for huge pages before any touch (a shared mapping would be shmem,
    which the `madvise` mode leaves in small pages)."""
    mapping = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if huge and hasattr(mmap, "MADV_HUGEPAGE"):
        mapping.madvise(mmap.MADV_HUGEPAGE)
    return mapping


class HugePageArena:
    """Copies tensors into anonymous memory marked for huge pages, packed one after another so that small
    matrices share pages. Not thread-safe: the model's loader only."""

    def __init__(self) -> None:
        self._segments: list[tuple[mmap.mmap, int]] = []     # (mapping, its first 2 MB-aligned byte)
        self._used = 0                                       # bytes used in the last segment, from its start
        self._size = 0                                       # usable bytes of the last segment

    def copy(self, t: torch.Tensor) -> torch.Tensor:
        """A contiguous copy of `t` in the arena, same shape and dtype."""
        return self.empty(tuple(t.shape), t.dtype).copy_(t)

    def empty(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A contiguous tensor in the arena (zeros until written: its pages are touched by the writer)."""
        nbytes = math.prod(shape) * dtype.itemsize
        start = -(-self._used // LINE) * LINE
        if not self._segments or start + nbytes > self._size:
            self._open(max(SEGMENT, nbytes))
            start = 0
        mapping, base = self._segments[-1]
        self._used = start + nbytes
        out = torch.frombuffer(mapping, dtype=torch.uint8, count=nbytes, offset=base + start)
        return out.view(dtype).view(shape)

    def reserve(self, nbytes: int) -> None:
        """Room for `nbytes` of copies mapped now, as one segment (untouched: each page is faulted in, zeroed by
        the kernel, by the copy that first writes it; gguf_packing.py's thread, off the loader's path)."""
        self._open(nbytes)

    def _open(self, size: int) -> None:
        size = -(-size // ALIGN) * ALIGN
        mapping = anonymous(size + ALIGN, huge=True)
        address = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
        self._segments.append((mapping, -address % ALIGN))
        self._used, self._size = 0, size
