"""A GGUF's quantized matrices packed (quantized.py: native/panel_blocks.h's panels) by a thread of their own,
started before the loader reads the tokenizer: one native call packs them one after another with the GIL
released and no OpenMP team (quant_matmul's pack_each), on the core the tokenizer's Python leaves idle, and drops
each matrix's file pages once it is packed, so the load's peak stays about the file's size. The thread also
faults in the arena's pages as it writes them (4 KB pages, zeroed by the kernel: huge_pages.py moves them into
huge pages once the model serves). `result()` packs what the thread has not reached yet on the caller's thread,
beside it.

Row order, decided from the file's own metadata (no transformers config is read before the tokenizer):
- where the flattened runner serves the file (`flat`), a q / k matrix is packed in the order its RoPE reads
  (weights.py's pair order): llama.cpp stores a `llama` (or `smollm3`) file's q / k rows so already (its
  converter's permute), so those are packed as they lie; a qwen2 / qwen3 / gemma3 file holds HF's order, and
  its rows are gathered while packing, as are a phi3 file's fused qkv's (its q and k sections each in pairs, v
  as it lies).
  `Packed.order` names the HF row each packed row holds: the HF forward (QuantLinear) puts its outputs back in
  HF's order, and weights.py reads it to take the matrix as it is.
- else in HF's order (a `llama` file's q / k rows permuted back, as transformers' loader does)."""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

import torch

from conch.engine.backends.conch.kv.huge_pages import LINE, HugePageArena
from conch.engine.backends.conch.model.quantized import QUANT_TYPES, QuantizedMatrix, file_blocks
from conch.engine.backends.conch.model.weights import Shape, pair_order, qkv_rows
from conch.engine.weights import gguf_config
from conch.engine.weights.gguf_file import GgufInfo

# A q / k / fused qkv (Phi-3: q | k | v) matrix's heads, by its GGUF key: the metadata keys of its q's or k's head
# count (a file without head_count_kv: as many kv heads as head_count)
_HEADS = {"attn_q": ("head_count",), "attn_k": ("head_count_kv",), "attn_qkv": ("head_count", "head_count_kv")}
# the architectures whose q / k rows llama.cpp's converter permutes (its LlamaModel and the models built on it)
_PERMUTED = frozenset({"llama", *gguf_config.AS_LLAMA})


@dataclass(frozen=True)
class Packed:
    matrix: QuantizedMatrix
    order: torch.Tensor | None       # (out,) the HF row each of its rows holds; None: HF's own order


def file_to_hf_rows(n: int, heads: int) -> torch.Tensor:
    """The inverse of llama.cpp's q/k permutation (convert_hf_to_gguf.py's `permute`): file rows -> HF rows."""
    forward = torch.arange(n).view(heads, 2, n // heads // 2).transpose(1, 2).reshape(n)
    return torch.argsort(forward)


class Packing:
    """The packs of a file's 2-D tensors of a kernel type, in flight on their thread from construction."""

    def __init__(self, info: GgufInfo, kernel: Any, flat: bool) -> None:
        self.arena = HugePageArena()
        tensors = [t for t in info.header.tensors
                   if len(t.shape) == 2 and getattr(t.tensor_type, "name", "") in QUANT_TYPES]
        shapes = [tuple(kernel.packed_shape(QUANT_TYPES[t.tensor_type.name], int(t.shape[0]), int(t.shape[1])))
                  for t in tensors]
        if shapes:
            self.arena.reserve(sum(-(-math.prod(s) // LINE) * LINE for s in shapes))
        self._packed: dict[str, Packed] = {}
        jobs = []
        for tensor, shape in zip(tensors, shapes, strict=True):
            ids, order = _rows(tensor, info, flat)
            qtype, K = QUANT_TYPES[tensor.tensor_type.name], int(tensor.shape[0])
            into = self.arena.empty(shape, torch.uint8)
            self._packed[tensor.name] = Packed(QuantizedMatrix(kernel, into, qtype, K, int(tensor.shape[1])), order)
            jobs.append((file_blocks(tensor), qtype, K, into, ids))
        self._kernel, self._jobs, self._next = kernel, jobs, torch.zeros(1, dtype=torch.long)  # next: the next job
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="gguf-packing", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._kernel.pack_each(self._jobs, release_sources=True, next=self._next)
        except BaseException as exc:                     # result() raises it on the loader's thread
            self._error = exc

    def result(self) -> dict[str, Packed]:
        """GGUF tensor name -> its packed matrix, once every pack is done (or the packing's error). The caller's
        thread packs the jobs the packing thread has not taken meanwhile."""
        self._kernel.pack_each(self._jobs, release_sources=True, next=self._next)
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._packed


def _rows(tensor: Any, info: GgufInfo, flat: bool) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(the file rows to pack, in order, or None for all as they lie; the HF row each packed row holds, or None
    for HF's order), per the module's note. A fused qkv: weights.qkv_rows' order (q and k in pairs, v as it is)."""
    parts = tensor.name.split(".")
    keys = _HEADS.get(parts[-2] if len(parts) >= 2 else "")
    if keys is None:
        return None, None
    meta, arch, n = info.header.metadata, info.architecture, int(tensor.shape[1])
    heads = [int(meta.get(f"{arch}.attention.{key}", meta[f"{arch}.attention.head_count"])) for key in keys]
    permuted = arch in _PERMUTED
    to_hf = file_to_hf_rows(n, heads[0]) if permuted else torch.arange(n)       # HF row h: file row to_hf[h]
    if not flat:
        return (to_hf if permuted else None), None
    head_dim = n // (heads[0] + 2 * heads[1]) if len(heads) == 2 else n // heads[0]
    rotary = int(meta.get(f"{arch}.rope.dimension_count", head_dim))
    order = (qkv_rows(Shape(heads[0], heads[1], head_dim, rotary)) if len(heads) == 2 else
             pair_order(n, heads[0], rotary))                     # the HF rows RoPE's pairs read
    ids = to_hf[order]
    return (None if torch.equal(ids, torch.arange(n)) else ids), order
