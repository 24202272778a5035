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
import threading

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
        """Room for `nbytes` of copies mapped now, its pages faulted in by a thread of its own while the caller
        goes on (a model's loader: its tokenizer, its imports). The kernel zeroes each page it hands out, and
        under a hypervisor that first touch is slow (~1 GB/s here, ~1 s of a 1B model's load when the packing
        itself touches them); the thread holds no GIL (ctypes) and runs no OpenMP region, so it takes the core
        the loader's Python leaves idle. A copy that lands on a page before the thread has reached it faults
        it itself: correct either way."""
        self._open(nbytes)
        mapping, base = self._segments[-1]
        start = ctypes.addressof(ctypes.c_char.from_buffer(mapping)) + base
        threading.Thread(target=_populate, args=(mapping, start, self._size), name="arena-populate",
                         daemon=True).start()

    def _open(self, size: int) -> None:
        size = -(-size // ALIGN) * ALIGN
        mapping = anonymous(size + ALIGN, huge=True)
        address = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
        self._segments.append((mapping, -address % ALIGN))
        self._used, self._size = 0, size


MADV_POPULATE_WRITE = 23     # Linux 5.14: fault the range in writable, as a write would, without writing


def _populate(mapping: mmap.mmap, start: int, size: int) -> None:
    """The pages of [start, start + size) of `mapping` (held mapped meanwhile) faulted in (best effort: an older
    kernel refuses the advice, and the copies then fault their pages themselves)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(size), MADV_POPULATE_WRITE)
    except (OSError, AttributeError):
        pass
