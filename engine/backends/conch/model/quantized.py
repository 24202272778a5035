"""A GGUF's quantized matrices as products (weights.py's Product): each matrix is read from the memory-mapped
file (engine/weights/gguf_header.py) once, at load, and repacked into 16-column panels of the same bits
(native/panel_blocks.h: the layout the products stream, about the file's size), and the file's pages are
released; native/quant_matmul.cpp decodes a panel's groups in registers for each product (bf16 x: an int8
product, as llama.cpp's; float32 x: the values a * q + b in float32, exact to the file), so no dequantized copy of
the weights is ever made.

Types with a kernel (QUANT_TYPES, read by native/ggml_blocks.h): Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K,
what Q8_0, Q4_0, Q4_K_M and Q5_K_M files hold (Q5_0 is also llama-quantize's fallback for a K-quant's rows that
are not a multiple of 256). F32 / F16 / BF16 matrices are plain tensors (weights.py's bf16 products serve them).
Any other type is not taken: `unsupported` names it, and the loader refuses the file or dequantizes it, saying
which."""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from conch.engine.backends.conch.kv.huge_pages import HugePageArena

# name -> ggml type number (native/ggml_blocks.h reads each)
QUANT_TYPES = {"Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14}
FLOAT_TYPES = frozenset({"F32", "F16", "BF16"})


@dataclass(frozen=True)
class QuantizedMatrix:
    """W (out, in) in ggml blocks, packed: y = x @ W^T, x (T, in) -> (T, out) in x's dtype; rows independent
    (quant_matmul.cpp: batch-invariant)."""
    kernel: Any                 # the compiled native/quant_matmul module
    packed: torch.Tensor        # (ceil(out / 16), panel bytes) uint8: native/panel_blocks.h's panels
    qtype: int
    in_features: int
    out_features: int

    @classmethod
    def pack(cls, kernel: Any, blocks: torch.Tensor, qtype: int, in_features: int,
             arena: HugePageArena | None = None) -> QuantizedMatrix:
        """From `blocks` (out, in / QK * block bytes) uint8, W's rows as the file stores them (a copy; in `arena`'s
        huge pages where given: a decode step streams every matrix, and 4 KB pages cost a TLB miss each)."""
        out = int(blocks.shape[0])
        return cls(kernel, kernel.pack(blocks, qtype, in_features, _placed(kernel, arena, qtype, in_features, out)),
                   qtype, in_features, out)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.kernel.matmul(x.contiguous(), self.packed, self.qtype, self.in_features, self.out_features)

    def rows(self, index: torch.Tensor, arena: HugePageArena | None = None) -> QuantizedMatrix:
        """The matrix of rows W[index] (a copy, still packed; in `arena` where given)."""
        into = _placed(self.kernel, arena, self.qtype, self.in_features, len(index))
        return QuantizedMatrix(self.kernel, self.kernel.rows(self.packed, self.qtype, self.in_features,
                                                             self.out_features, index, into),
                               self.qtype, self.in_features, len(index))

    def dequantized_rows(self, ids: torch.Tensor) -> torch.Tensor:
        """(len(ids), in) float32: rows `ids` of W, the values the kernel multiplies by."""
        return self.kernel.dequantize_rows(self.packed, self.qtype, self.in_features, self.out_features, ids)

    def dequantized(self) -> torch.Tensor:
        """(out, in) float32: the values the kernel multiplies by (for references and tests)."""
        return self.kernel.dequantize(self.packed, self.qtype, self.in_features, self.out_features)


def unsupported(types: frozenset[str]) -> list[str]:
    return sorted(types - FLOAT_TYPES - set(QUANT_TYPES))


def _placed(kernel: Any, arena: HugePageArena | None, qtype: int, in_features: int, out: int) -> torch.Tensor | None:
    """Room in `arena` for a packed (out, in_features) matrix of `qtype`, or None (the kernel allocates)."""
    return None if arena is None else arena.empty(tuple(kernel.packed_shape(qtype, in_features, out)), torch.uint8)


def file_blocks(tensor: Any) -> torch.Tensor:
    """A GGUF tensor's data (gguf_header.GgufTensor, or gguf's ReaderTensor) as a tensor over the read-only map:
    (rows, bytes of a row) uint8 blocks, or the values of a float type."""
    with warnings.catch_warnings():             # the map is read-only, and nothing here writes to it
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(np.asarray(tensor.data))


class QuantLinear(torch.nn.Module):
    """An HF model's nn.Linear replaced by a QuantizedMatrix (gguf_layers.py): the HF forward (prompt
    logprobs) computes through the same kernel as the flattened one. `order`: the HF row each of the matrix's
    rows holds, where they were packed in another order (gguf_packing.py: q / k in RoPE's pairs); the forward
    puts its outputs back in HF's order (the bias is in HF's order)."""

    def __init__(self, matrix: QuantizedMatrix, bias: torch.Tensor | None, order: torch.Tensor | None = None) -> None:
        super().__init__()
        self.matrix, self.bias, self.order = matrix, bias, order
        self._back = None if order is None else torch.argsort(order)     # HF row h: the matrix's row _back[h]
        self.in_features, self.out_features = matrix.in_features, matrix.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.matrix(x.reshape(-1, self.in_features))
        y = (y if self._back is None else y[:, self._back]).view(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias


class QuantEmbedding(torch.nn.Module):
    """A token embedding kept in a GGUF's blocks (gguf_layers.py): a lookup dequantizes the rows it reads, in
    `dtype`; times `scale` in forward (the HF module's own: Gemma's hidden^1/2), never in `rows`. A tied model's
    head is a QuantLinear over the same packed blocks, so neither holds a dequantized copy of the vocabulary."""

    def __init__(self, matrix: QuantizedMatrix, dtype: torch.dtype, scale: torch.Tensor | None) -> None:
        super().__init__()
        self.matrix, self.dtype = matrix, dtype
        self.scale = scale

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """(*ids.shape, hidden) in dtype: the rows `ids` name, as the kernel's float32 product reads them."""
        values = self.matrix.dequantized_rows(ids.reshape(-1))
        return values.to(self.dtype).view(*ids.shape, self.matrix.in_features)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.rows(ids)
        return x if self.scale is None else x * self.scale.to(self.dtype)


def embedding_rows(module: torch.nn.Module) -> tuple[Any, torch.dtype]:
    """An input embedding's lookup ids -> (*ids.shape, hidden) without the module's own scale, and its dtype."""
    if isinstance(module, QuantEmbedding):
        return module.rows, module.dtype
    weight: torch.Tensor = module.weight        # type: ignore[assignment]   # an nn.Embedding's
    return weight.__getitem__, weight.dtype


@dataclass(frozen=True)
class Stacked:
    """Products side by side: x -> [p(x) for p in parts] concatenated along the output (q | k | v when their
    types differ, as in a Q4_K_M file). Parts that are all QuantizedMatrix of one kernel run as one native
    product (quant_matmul.cpp's matmul_parts: one pass over all their panels, the same bits as each alone)."""
    parts: tuple[Any, ...]
    bias: torch.Tensor | None = None
    _native: bool = field(init=False, repr=False, default=False)

    def __post_init__(self) -> None:
        quantized = all(isinstance(p, QuantizedMatrix) for p in self.parts)
        one = quantized and len({(id(p.kernel), p.in_features) for p in self.parts}) == 1
        object.__setattr__(self, "_native", one)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self._native:
            first = self.parts[0]
            y = first.kernel.matmul_parts(x.contiguous(), [p.packed for p in self.parts],
                                          [p.qtype for p in self.parts], first.in_features,
                                          [p.out_features for p in self.parts])
        else:
            y = torch.cat([p(x) for p in self.parts], dim=-1)
        return y if self.bias is None else y + self.bias


@dataclass(frozen=True)
class Scaled:
    """A product whose outputs are multiplied by `scale` (a number, or (out,) float32 per output), rounded once
    to x's dtype: a family's multiplier that a quantized matrix cannot take folded into its rows (Granite's q and
    residual multipliers; weights.py folds them into a plain matrix). Elementwise: rows stay independent."""
    product: Any
    scale: Any

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return (self.product(x) * self.scale).to(x.dtype)
