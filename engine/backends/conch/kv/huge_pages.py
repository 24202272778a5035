"""Weights in transparent huge pages: the memory a decode step streams, laid out one after another.

Why: a decode step reads every weight once. In 4 KB pages that is a TLB miss every 4 KB, and under a
hypervisor each miss walks two page tables, so weights stream markedly faster from 2 MB pages (the figures:
docs/performance-journal.md, "Figures once in module docstrings").

When: an arena's pages are first touched (faulted in, zeroed by the kernel) as 4 KB pages while the model
loads, and collapsed into 2 MB pages afterwards, a chunk at a time, by whoever calls `collapse_some` (an idle
engine thread: core/engine_core.py). Faulting them in as huge pages directly put the kernel's huge-page
allocation on the load's path: under this machine's hypervisor a fresh huge page costs ~2 s a GiB at first
touch (the host backs it page by page), against ~0.4 s a GiB for 4 KB pages. MADV_COLLAPSE (Linux 6.1+) moves
a range into huge pages whatever the THP mode; an older kernel gets MADV_HUGEPAGE instead (khugepaged collapses
it in its own time); elsewhere the arena stays in small pages and works the same.

Invariant: a copy is never moved or freed while the arena lives (the tensors view its segments); a collapse
keeps every byte's value and address (the kernel copies the pages under its own locks).
"""
from __future__ import annotations

import ctypes
import math
import mmap
import sys
import threading
import weakref
from dataclasses import dataclass

import torch

ALIGN = 2 << 20              # a huge page
SEGMENT = 256 << 20          # bytes mapped at a time (reserved, not touched, until a copy lands there)
LINE = 64                    # copies start on a cache line
COLLAPSE_STEP = 8 << 20      # bytes one collapse_some call moves into huge pages (a fresh huge page: ~4 ms here)
MADV_HUGEPAGE, MADV_COLLAPSE = 14, 25      # Linux's values


def anonymous(size: int) -> mmap.mmap:
    """`size` bytes of private anonymous memory: zeros, each page faulted in on first touch, never another
    allocation's leftovers."""
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


@dataclass
class _Extent:
    """A segment's bytes in use, for `collapse_some`: from `start` (the address of its first huge page)."""
    mapping: weakref.ref           # the segment's mapping: once it is freed, nothing is left to collapse
    start: int
    used: int = 0                  # bytes in use (the arena moves it on as copies land)
    done: int = 0                  # bytes already collapsed (or given up on), a multiple of ALIGN


_pending: list[_Extent] = []       # the extents of every live arena of the process, oldest first
_pending_lock = threading.Lock()


def collapse_some(limit: int = COLLAPSE_STEP) -> bool:
    """Moves up to `limit` bytes of the oldest arena extent not yet collapsed into huge pages; False when none
    is left. An extent still growing (its arena loading) is taken up again as it grows; a freed one is dropped.
    Thread-safe: two callers take different chunks. The madvise runs with the GIL released."""
    with _pending_lock:
        _pending[:] = [e for e in _pending if e.mapping() is not None]
        extent = next((e for e in _pending if e.done < _rounded(e.used)), None)
        if extent is None:
            return False
        alive = extent.mapping()                 # held until the madvise returns
        begin, length = extent.start + extent.done, min(limit, _rounded(extent.used) - extent.done)
        extent.done += length
    if _madvise(begin, length, MADV_COLLAPSE) == 22:               # EINVAL: a kernel without MADV_COLLAPSE
        _madvise(begin, length, MADV_HUGEPAGE)
    del alive
    return True


def _rounded(used: int) -> int:
    return -(-used // ALIGN) * ALIGN


_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def _madvise(address: int, length: int, advice: int) -> int:
    """0, or the errno of madvise(2) (EAGAIN / ENOMEM: the range stays in small pages)."""
    if _libc is None:
        return 0
    if _libc.madvise(ctypes.c_void_p(address), ctypes.c_size_t(length), ctypes.c_int(advice)) == 0:
        return 0
    return ctypes.get_errno()


class HugePageArena:
    """Copies tensors into anonymous memory that collapse_some later moves into huge pages, packed one after
    another so that small matrices share pages. Not thread-safe: the model's loader only (collapse_some reads
    each segment's extent, which only grows)."""

    def __init__(self) -> None:
        self._segments: list[tuple[mmap.mmap, int]] = []     # (mapping, its first 2 MB-aligned byte)
        self._size = 0                                       # usable bytes of the last segment
        self._extent: _Extent | None = None                  # the last segment's bytes used (collapse_some's too)

    def copy(self, t: torch.Tensor) -> torch.Tensor:
        """A contiguous copy of `t` in the arena, same shape and dtype."""
        return self.empty(tuple(t.shape), t.dtype).copy_(t)

    def empty(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A contiguous tensor in the arena (zeros until written: its pages are touched by the writer)."""
        nbytes = math.prod(shape) * dtype.itemsize
        extent = self._extent
        start = 0 if extent is None else -(-extent.used // LINE) * LINE
        if extent is None or start + nbytes > self._size:
            extent, start = self._open(max(SEGMENT, nbytes)), 0
        mapping, base = self._segments[-1]
        extent.used = start + nbytes
        out = torch.frombuffer(mapping, dtype=torch.uint8, count=nbytes, offset=base + start)
        return out.view(dtype).view(shape)

    def reserve(self, nbytes: int) -> None:
        """Room for `nbytes` of copies mapped now, as one segment (untouched: each page is faulted in, zeroed by
        the kernel, by the copy that first writes it: gguf_packing.py's thread, off the loader's path)."""
        self._open(nbytes)

    def _open(self, size: int) -> _Extent:
        """A new last segment of `size` usable bytes, none used; its extent, registered for collapse_some."""
        size = _rounded(size)
        mapping = anonymous(size + ALIGN)
        address = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
        self._segments.append((mapping, -address % ALIGN))
        self._size = size
        self._extent = _Extent(weakref.ref(mapping), address + self._segments[-1][1])
        with _pending_lock:
            _pending.append(self._extent)
        return self._extent
