"""The HF runner's KV: one transformers DynamicCache for the running batch, rows left-padded to a common length.

Shapes: per layer keys/values are (B, kv_heads, T, head_dim); `mask` is (B, T) with 1 on real tokens.
Invariant: row i of the cache belongs to the i-th sequence of the batch; every row has the same T, shorter
sequences are padded on the left and masked out.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


def _left_pad(x: torch.Tensor, pad: int) -> torch.Tensor:
    return F.pad(x, (0, 0, pad, 0)) if pad else x        # (B, H, T, D) -> (B, H, pad + T, D)


def layers(cache: DynamicCache) -> list[DynamicLayer]:
    """The cache's layers: full attention (DynamicLayer) in every model Conch runs, nothing linear or dummy."""
    out = [layer for layer in cache.layers if isinstance(layer, DynamicLayer)]
    if len(out) != len(cache.layers):
        raise TypeError("the model's KV cache has layers other than attention ones (DynamicLayer)")
    return out


def kv(layer: DynamicLayer) -> tuple[torch.Tensor, torch.Tensor]:
    """A filled layer's (keys, values), each (B, kv_heads, T, head_dim)."""
    if layer.keys is None or layer.values is None:
        raise ValueError("a KV cache layer that was never filled")
    return layer.keys, layer.values


class PaddedKV:
    def __init__(self) -> None:
        self.cache: DynamicCache | None = None
        self.mask = torch.zeros(0, 0, dtype=torch.long)   # (B, T)

    @property
    def batch_size(self) -> int:
        return self.mask.shape[0]

    @property
    def length(self) -> int:
        return self.mask.shape[1]

    def merge(self, other: DynamicCache, other_mask: torch.Tensor) -> None:
        """Append the rows of a freshly prefilled cache, padding whichever side is shorter."""
        if self.cache is None or self.batch_size == 0:
            self.cache, self.mask = other, other_mask
            return
        total = max(self.length, other_mask.shape[1])
        pad_self, pad_other = total - self.length, total - other_mask.shape[1]
        for mine, theirs in zip(layers(self.cache), layers(other), strict=True):
            (keys, values), (other_keys, other_values) = kv(mine), kv(theirs)
            mine.keys = torch.cat([_left_pad(keys, pad_self), _left_pad(other_keys, pad_other)])
            mine.values = torch.cat([_left_pad(values, pad_self), _left_pad(other_values, pad_other)])
        self.mask = torch.cat([F.pad(self.mask, (pad_self, 0)), F.pad(other_mask, (pad_other, 0))])

    def keep(self, rows: list[int]) -> None:
        """Keep only these rows (in this order), then drop leading columns that are padding in every row."""
        if not rows:
            self.cache, self.mask = None, torch.zeros(0, 0, dtype=torch.long)
            return
        assert self.cache is not None
        index = torch.tensor(rows, dtype=torch.long)
        mask = self.mask.index_select(0, index)
        used = mask.any(0).nonzero()
        start = int(used[0]) if len(used) else 0
        for layer in layers(self.cache):
            keys, values = kv(layer)
            layer.keys = keys.index_select(0, index)[:, :, start:]
            layer.values = values.index_select(0, index)[:, :, start:]
        self.mask = mask[:, start:]

    def extend_mask(self) -> torch.Tensor:
        """Mask for a decode step: one more real column for every row. Returns the (B, T + 1) mask."""
        self.mask = F.pad(self.mask, (0, 1), value=1)
        return self.mask
