"""A GGUF's quantized matrices as products (weights.py's Product), read in place: the file is memory-mapped
(engine/weights/gguf_header.py) and each matrix stays in its ggml blocks; native/quant_matmul.cpp reads a
block into registers for each product (bf16 x: an int8 product, as llama.cpp's; float32 x: the values a * q + b
in float32, exact to the file), so no dequantized copy of the weights is ever made.

Types with a kernel (QUANT_TYPES, read by native/ggml_blocks.h): Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K,
what Q8_0, Q4_0, Q4_K_M and Q5_K_M files hold (Q5_0 is also llama-quantize's fallback for a K-quant's rows that
are not a multiple of 256). F32 / F16 / BF16 matrices are plain tensors (weights.py's bf16 products serve them).
Any other type is not taken: `unsupported` names it, and the loader refuses the file or dequantizes it, saying
which."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

# name -> ggml type number (native/ggml_blocks.h reads each)
QUANT_TYPES = {"Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14}
FLOAT_TYPES = frozenset({"F32", "F16", "BF16"})


@dataclass(frozen=True)
class QuantizedMatrix:
    """W (out, in) in ggml blocks: y = x @ W^T, x (T, in) -> (T, out) in x's dtype; rows independent
    (quant_matmul.cpp: batch-invariant)."""
    kernel: Any                 # the compiled native/quant_matmul module
    blocks: torch.Tensor        # (out, in / QK * block bytes) uint8, a view of the memory-mapped file
    qtype: int
    in_features: int

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.kernel.matmul(x.contiguous(), self.blocks, self.qtype, self.in_features)

    def rows(self, index: torch.Tensor) -> QuantizedMatrix:
        """The matrix with its rows in `index`'s order (a copy of those rows' blocks, still quantized)."""
        return QuantizedMatrix(self.kernel, self.blocks[index].contiguous(), self.qtype, self.in_features)

    def dequantized(self) -> torch.Tensor:
        """(out, in) float32: the values the kernel multiplies by (for references and tests)."""
        return self.kernel.dequantize(self.blocks, self.qtype, self.in_features)


def unsupported(types: frozenset[str]) -> list[str]:
    return sorted(types - FLOAT_TYPES - set(QUANT_TYPES))


def read_matrix(tensor: Any, kernel: Any) -> QuantizedMatrix | torch.Tensor:
    """A GGUF tensor (gguf_header.GgufTensor, or gguf's ReaderTensor): a QuantizedMatrix over its blocks (no
    copy), or a float tensor (F32/F16/BF16) as (out, in)."""
    name = tensor.tensor_type.name
    data = np.asarray(tensor.data)
    with warnings.catch_warnings():             # the map is read-only, and nothing here writes to it
        warnings.simplefilter("ignore", UserWarning)
        view = torch.from_numpy(data)
    if name in QUANT_TYPES:
        return QuantizedMatrix(kernel, view, QUANT_TYPES[name], int(tensor.shape[0]))
    if name == "BF16":
        return view.view(torch.bfloat16)
    if name in FLOAT_TYPES:
        return view
    raise ValueError(f"tensor {tensor.name}: ggml type {name} has no kernel")


class QuantLinear(torch.nn.Module):
    """An HF model's nn.Linear replaced by a QuantizedMatrix (gguf_layers.py): the HF forward (prompt
    logprobs) computes through the same kernel as the flattened one."""

    def __init__(self, matrix: QuantizedMatrix, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.matrix = matrix
        self.bias = bias
        self.in_features, self.out_features = matrix.in_features, matrix.blocks.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.matrix(x.reshape(-1, self.in_features)).view(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias


class QuantEmbedding(torch.nn.Module):
    """A token embedding kept in a GGUF's blocks (gguf_layers.py): a lookup dequantizes the rows it reads, in
    `dtype`; times `scale` in forward (the HF module's own: Gemma's hidden^1/2), never in `rows`. A tied model's
    head is a QuantLinear over the same blocks, so neither holds a dequantized copy of the vocabulary."""

    def __init__(self, matrix: QuantizedMatrix, dtype: torch.dtype, scale: torch.Tensor | None) -> None:
        super().__init__()
        self.matrix, self.dtype = matrix, dtype
        self.scale = scale

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """(*ids.shape, hidden) in dtype: the rows `ids` name, as the kernel's float32 product reads them."""
        flat = self.matrix.blocks[ids.reshape(-1)]
        values = self.matrix.kernel.dequantize(flat, self.matrix.qtype, self.matrix.in_features)
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
    types differ, as in a Q4_K_M file)."""
    parts: tuple[Any, ...]
    bias: torch.Tensor | None = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cat([p(x) for p in self.parts], dim=-1)
        return y if self.bias is None else y + self.bias
