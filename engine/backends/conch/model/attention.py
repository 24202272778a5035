"""A flattened step's attention over the slot KV store: decode rows batched, prefill chunks one by one."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from conch.engine.backends.conch.model.kernels import Kernels
from conch.engine.backends.conch.kv.slot_store import SlotKVStore
from conch.engine.backends.conch.model.step import Step


class Attention:
    """Per-step attention plan: the decode rows (one token each) batched over a slot range, the prefill
    chunks one by one. Masks are built once per step and reused by every layer.

    Decode rows, batch-invariant (Kernels.rows, wherever the prefill kernel serves): native/prefill_attention.cpp's
    `attention_rows`, the arithmetic its chunks use, so a token's output is the same in a chunk, as a decode
    row, or as a kept slot's next token; over a blocked store (the runner's, see slot_store.py) both read the
    slot's blocks in place, over a plain one they pack its columns per call. Else GQA without copies: a row's
    H query heads viewed as (G, H/G), so each kv head is read once: by native/decode_attention.cpp (bf16) over
    each row's own columns, or by one SDPA call over the slot range with a length mask (not SDPA's enable_gqa
    path, slower on CPU).
    A prefill chunk goes through native/prefill_attention.cpp (bf16), or
    else SDPA: is_causal when the chunk starts at position 0 (it skips the masked blocks), an explicit mask
    offset by the tokens already stored otherwise.
    A sliding-window layer (`window`: Gemma 3's local layers) goes through SDPA span by span over the columns in
    the window of its own slot only (a query at position p sees keys p - window < j <= p, HF's
    sliding_window_overlay), so it never reads an unwritten column whatever the store's policy; the store is a
    plain one (Kernels.load's `windowed`).
    A chunk whose image tokens attend to each other both ways (`Step.sees`: Gemma 3) goes through SDPA with a
    mask of each query's reach, over a plain store (Gemma 3's, windowed)."""

    def __init__(self, step: Step, kv: SlotKVStore, heads: int, kv_heads: int, kernels: Kernels) -> None:
        self.gqa = heads != kv_heads
        self.groups = (kv_heads, heads // kv_heads)
        self.spans = step.spans
        self.windowed: dict[int, list[torch.Tensor | None]] = {}        # window -> each span's mask
        decode = [s for s in step.spans if s.n == 1]
        self.chunks = [s for s in step.spans if s.n > 1]
        self.decode_rows = torch.tensor([s.offset for s in decode], dtype=torch.long)
        self.kernels = kernels
        self.blocked = kv.blocked           # then the native kernels serve every row (Kernels.blocked)
        assert not kv.blocked or kernels.blocked, "a blocked store needs the native prefill kernel"
        if decode and kernels.rows is not None:
            self.slots = torch.tensor([s.slot for s in decode], dtype=torch.long)
            self.positions = torch.tensor([s.start for s in decode], dtype=torch.long)
        elif decode and kernels.decode is not None:
            self.slots = torch.tensor([s.slot for s in decode], dtype=torch.long)
            self.lengths = torch.tensor([s.start + 1 for s in decode], dtype=torch.long)
        elif decode:
            self.lo = min(s.slot for s in decode)
            hi = max(s.slot for s in decode) + 1
            self.columns = max(s.start for s in decode) + 1
            self.decode_slots = torch.tensor([s.slot - self.lo for s in decode], dtype=torch.long)
            lengths = torch.zeros(hi - self.lo, dtype=torch.long)
            lengths[self.decode_slots] = torch.tensor([s.start + 1 for s in decode])
            self.hi = hi
            # (S, 1, 1, C): slot row sees its own columns 0..len-1; rows of slots not decoding see column 0 only
            self.mask = (torch.arange(self.columns) < lengths.clamp(min=1).unsqueeze(1)).view(hi - self.lo, 1, 1, -1)
        self.sees = step.sees
        self.causal = [self._chunk_mask(s) for s in self.chunks]     # (n, start + n), None: is_causal or native
        assert not (self.blocked and any(m is not None for m in self.causal)), "an image chunk reads a plain store"

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None = None) -> torch.Tensor:
        """q (T, H, D); k, v the layer's store (slots, G, capacity, D). Returns (T, H, D). `window`: the
        layer's sliding window in tokens, None: it attends to every token before."""
        if window is not None:
            return self._windowed(q, k, v, window)
        if not self.chunks:
            return self._decode(q, k, v)                                # decode rows only: rows 0..T-1
        out = q.new_empty(q.shape)
        if len(self.decode_rows):
            out[self.decode_rows] = self._decode(q[self.decode_rows], k, v)
        for s, mask in zip(self.chunks, self.causal, strict=True):
            rows = slice(s.offset, s.offset + s.n)
            if self.kernels.prefill is not None and mask is None:
                self.kernels.prefill(q[rows], k, v, s.slot, s.start, q.shape[2] ** -0.5, out[rows], self.blocked)
                continue
            qc = q[rows].transpose(0, 1).unsqueeze(0)                        # (1, H, n, D)
            end = s.start + s.n
            o = F.scaled_dot_product_attention(qc, k[s.slot:s.slot + 1, :, :end], v[s.slot:s.slot + 1, :, :end],
                                               attn_mask=mask, is_causal=mask is None, enable_gqa=self.gqa)
            out[rows] = o[0].transpose(0, 1)
        return out

    def _seen(self, start: int, offset: int, n: int) -> torch.Tensor:
        """(n,) the last position each of a span's queries attends to: its own, or its image's last (Step.sees)."""
        return torch.arange(start, start + n) if self.sees is None else self.sees[offset:offset + n]

    def _chunk_mask(self, s) -> torch.Tensor | None:
        """(n, start + n): query start + i sees key j when j <= its reach; None when that is plain causal
        attention and the native kernel or SDPA's is_causal (a chunk from position 0) serves it."""
        plain_served = s.start == 0 or self.kernels.prefill is not None
        if self.sees is None and plain_served:                       # a text step builds no tensor here
            return None
        seen = self._seen(s.start, s.offset, s.n)
        if plain_served and torch.equal(seen, torch.arange(s.start, s.start + s.n)):
            return None
        return torch.arange(s.start + s.n).unsqueeze(0) <= seen.unsqueeze(1)

    def _windowed(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
        """Every span, decode row or chunk, by SDPA over its slot's columns max(0, start - window + 1) .. end."""
        assert not self.blocked, "a windowed layer reads a plain store"
        masks = self.windowed.get(window)
        if masks is None:
            masks = self.windowed[window] = [self._window_mask(s, window) for s in self.spans]
        out = q.new_empty(q.shape)
        for s, mask in zip(self.spans, masks, strict=True):
            lo, end, rows = max(0, s.start - window + 1), s.start + s.n, slice(s.offset, s.offset + s.n)
            o = F.scaled_dot_product_attention(q[rows].transpose(0, 1).unsqueeze(0), k[s.slot:s.slot + 1, :, lo:end],
                                               v[s.slot:s.slot + 1, :, lo:end], attn_mask=mask, enable_gqa=self.gqa)
            out[rows] = o[0].transpose(0, 1)                                   # (1, H, n, D) -> (n, H, D)
        return out

    def _window_mask(self, s, window: int) -> torch.Tensor | None:
        """(n, end - lo): query start + i sees key lo + j when it is within its reach (Step.sees: not after it,
        or in its image) and the window (HF's AND(sliding window, OR(causal, image block))); None for one query
        (it sees every column read)."""
        if s.n == 1:
            return None
        lo, end = max(0, s.start - window + 1), s.start + s.n
        query, key = torch.arange(s.start, end).unsqueeze(1), torch.arange(lo, end).unsqueeze(0)
        return (key <= self._seen(s.start, s.offset, s.n).unsqueeze(1)) & (key > query - window)

    def _decode(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q (N, H, D): the one-token rows' queries, in span order -> their attention (N, H, D)."""
        (G, R), D = self.groups, q.shape[2]
        if self.kernels.rows is not None:
            out = q.new_empty(q.shape)
            self.kernels.rows(q, k, v, self.slots, self.positions, D ** -0.5, out, self.blocked)
            return out
        if self.kernels.decode is not None:
            grouped = q.contiguous().view(-1, G, R, D)
            return self.kernels.decode(grouped, k, v, self.slots, self.lengths, D ** -0.5).view(q.shape)
        qs = q.new_zeros((self.hi - self.lo, G, R, D))
        qs[self.decode_slots] = q.reshape(-1, G, R, D)
        o = F.scaled_dot_product_attention(qs, k[self.lo:self.hi, :, :self.columns],
                                           v[self.lo:self.hi, :, :self.columns], attn_mask=self.mask)
        return o[self.decode_slots].view(q.shape)                       # (S, G, R, D) -> rows (H, D)
