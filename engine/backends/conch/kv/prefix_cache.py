"""Automatic prefix caching: the KV of long prompt prefixes seen before, reused by later prompts.

Prefixes are block-aligned (BLOCK tokens) so that prompts sharing a long head (a system prompt, 20 tools'
schemas) find it whatever follows. Entries hold per-layer (keys, values) of shape (1, kv_heads, P, head_dim)
for P real tokens at positions 0..P-1, and are evicted least recently used within a byte budget.
Only prompts of at least `min_tokens` are stored, so short chats cost nothing.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

BLOCK = 64

LayerKV = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class _Entry:
    ids: tuple[int, ...]
    layers: LayerKV
    nbytes: int


class PrefixCache:
    def __init__(self, budget_bytes: int, min_tokens: int = 4 * BLOCK) -> None:
        self.budget = budget_bytes
        self.min_tokens = min_tokens
        self._entries: OrderedDict[tuple[int, ...], _Entry] = OrderedDict()
        self._index: dict[tuple[int, ...], tuple[int, ...]] = {}   # block-aligned prefix -> entry key
        self.nbytes = 0
        self.queried_tokens = 0        # prompt tokens looked up, cumulative (vLLM's prefix_cache_queries)
        self.hit_tokens = 0            # of those, tokens whose KV was reused: from here, or kept in their slot
                                       # (lookup's `held`): vLLM's prefix_cache_hits

    @property
    def enabled(self) -> bool:
        """Prefix caching is on: this cache's budget, and the KV store's reuse of a slot's kept tokens."""
        return self.budget > 0

    def lookup(self, ids: list[int], held: int = 0) -> tuple[int, LayerKV] | None:
        """The longest cached block-aligned prefix that leaves at least one token to prefill, if longer than
        the `held` tokens whose KV the sequence's slot already has; those count as hits when it is not."""
        self.queried_tokens += len(ids)
        self.hit_tokens += held
        found = self._longest(ids, max(self.min_tokens, held + 1))
        if found is None:
            return None
        n, key = found
        self._entries.move_to_end(key)
        self.hit_tokens += n - held
        return n, [(k[:, :, :n], v[:, :, :n]) for k, v in self._entries[key].layers]

    def cached(self, ids: list[int]) -> int:
        """The tokens of `ids`' longest cached head that lookup would give (0: none); no statistics counted."""
        found = self._longest(ids, self.min_tokens)
        return 0 if found is None else found[0]

    def _longest(self, ids: list[int], shortest: int) -> tuple[int, tuple[int, ...]] | None:
        """(n, the entry's key) of the longest indexed block-aligned head of `ids`, at least `shortest` tokens,
        that leaves at least one token to prefill; None when none is."""
        if not self._entries:
            return None
        for n in range((len(ids) - 1) // BLOCK * BLOCK, shortest - 1, -BLOCK):
            key = self._index.get(tuple(ids[:n]))
            if key is not None:
                return n, key
        return None

    def wants(self, ids: list[int]) -> bool:
        n = len(ids) // BLOCK * BLOCK
        return self.budget > 0 and n >= self.min_tokens and tuple(ids[:n]) not in self._entries

    def store(self, ids: list[int], layers: LayerKV) -> None:
        """`layers`: this prompt's KV for its first len(ids) // BLOCK * BLOCK tokens (copied here)."""
        n = len(ids) // BLOCK * BLOCK
        key = tuple(ids[:n])
        kept = [(k[:, :, :n].clone(), v[:, :, :n].clone()) for k, v in layers]
        nbytes = sum(k.nbytes + v.nbytes for k, v in kept)
        if nbytes > self.budget:
            return
        for m in range(self.min_tokens, n, BLOCK):          # a shorter head of this one: subsumed, dropped
            if key[:m] in self._entries:
                self._drop(key[:m])
        while self.nbytes + nbytes > self.budget:
            self._evict()
        self._entries[key] = _Entry(key, kept, nbytes)
        self.nbytes += nbytes
        for m in range(self.min_tokens, n + 1, BLOCK):
            self._index[key[:m]] = key

    def _evict(self) -> None:
        self._drop(next(iter(self._entries)))

    def _drop(self, key: tuple[int, ...]) -> None:
        entry = self._entries.pop(key)
        self.nbytes -= entry.nbytes
        for m in range(self.min_tokens, len(key) + 1, BLOCK):
            if self._index.get(key[:m]) == key:
                del self._index[key[:m]]
