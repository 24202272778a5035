"""A KV store without left padding: one slot per running sequence, its tokens at columns 0..len-1.

Shapes: per layer `k[l]` and `v[l]` are (slots, kv_heads, capacity, head_dim). Slot s holds the KV of its
occupant's tokens 0..computed-1 at columns 0..computed-1 (`occupant.computed`, the sequence's one count of
its stored tokens, is what `lengths[s]` reads); later columns hold zeros or garbage that
attention masks out or never reads. A step writes only its new tokens (index_put at (slot, position));
nothing is copied per step. Capacity grows in steps of 256 columns, which copies each running slot's
stored columns once.

Layout (`blocked`, chosen by the runner when the native kernels serve: bf16, head_dim 64 or 128): each
(slot, kv head) region of capacity x head_dim holds its keys and values in native/prefill_attention.cpp's
blocks of 64 tokens (keys [block][D/2][64][2], values [block][32][D][2]) instead of one row per token, so
the prefill and decode-row kernels read them in place instead of packing a slot's columns on every call;
fused_ops.cpp's rope_store writes there. Column c still lives in block c / 64 of its region, so a slot's
first n tokens are its first ceil(n / 64) blocks: growth copies whole blocks, the prefix cache converts in
and out (`head`, `load_prefix`). Its memory comes zeroed from the OS (never another allocation's leftovers:
the kernels read a block's tail past a row's length, with probability 0, and 0 x NaN is NaN).

Policy (`StorePolicy`, chosen explicitly by the runner from the attention it runs): RESERVED ("unzeroed"
below) for a reader that never reads past a length (the native attention kernels); ZEROED for
one that masks the columns past a length (SDPA adds -inf to their scores, and garbage there may be NaN).

Slots: an unzeroed store takes all `max_slots` at once. The
memory is only reserved: a page is written, so faulted in, when a token's KV first lands in it, and a burst
of 64 requests copies nothing (doubling from 8 copied the store three times into fresh pages, in every
burst's first step after an idle store had given its memory back). A zeroed store
(SDPA reads masked columns, which must not hold NaN) writes every byte it allocates, so it doubles from 8.

Budget: `admit` refuses a sequence when the bytes the store would then hold pass `budget_bytes`. A zeroed
store holds every running slot at the capacity the longest sequence needs (its zeros are written). An
unzeroed one holds, per slot, the columns its tokens have touched since the store was allocated, or a
running sequence's whole need if larger: a reservation by need, not by the longest one's capacity. A newcomer
takes the free slot that adds the fewest pages (best fit among those whose pages cover its need).

Idle: a zeroed store gives its memory back. An unzeroed one keeps its pages (at most the budget, as vLLM
keeps its whole KV pool): faulting them in again would cost every burst after an idle moment (the figures:
docs/performance-journal.md, "Figures once in module docstrings").

Reuse: a freed unzeroed slot also keeps the token ids whose KV its columns hold (the leaving sequence's
computed tokens). A newcomer whose prompt starts with at least `MIN_REUSE` of them, and at least half, takes
that slot and starts there (`lengths[slot]`): the next turn of a conversation prefills only what the last
turn did not compute, and nothing is copied (the prefix cache copies a cached head into the slot). The last
prompt token is always computed (its logits give the first token). Otherwise a newcomer takes the slot that
adds the fewest new pages (a fresh slot's first use faults its pages in: ~7 ms of a 38-token prompt's step
here), and among those one keeping no tokens, else the one whose kept tokens are the oldest, so the newest
conversations stay. A growth of the columns copies only the running slots, so it forgets what the free
ones held.
"""
from __future__ import annotations

import enum
import math
from typing import Protocol

import torch
import torch.nn.functional as F

from conch.engine.backends.conch.kv.huge_pages import anonymous

SLOT_STEP = 8
COLUMN_STEP = 256
BLOCK = 64              # keys per block of the blocked layout (prefill_attention.cpp's kKeys)
MIN_REUSE = 16          # kept tokens a prompt must start with to take their slot


class StorePolicy(enum.Enum):
    RESERVED = "reserved"   # memory reserved, not written: all slots at once, pages and tokens kept when freed
    ZEROED = "zeroed"       # every column written with zeros: slots doubled from 8, memory given back when idle


class Occupant(Protocol):
    """What a slot holds the KV of (a Sequence)."""

    computed: int           # tokens whose KV its slot holds, at columns 0..computed-1


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


def _untouched_zeros(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Zeros the OS supplies page by page on first touch (an anonymous private mapping): nothing written now,
    and never another allocation's leftovers (a blocked store's kernels read a block's tail unmasked)."""
    nbytes = math.prod(shape) * torch.finfo(dtype).bits // 8
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(anonymous(nbytes), dtype=torch.uint8, count=nbytes).view(dtype).view(shape)


def _to_blocked(k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(G, P, D) plain keys and values -> (G, P', D) in the blocked layout, P' = P rounded up to 64 (zeros)."""
    G, P, D = k.shape
    B = -(-P // BLOCK)
    k, v = (F.pad(t, (0, 0, 0, B * BLOCK - P)) for t in (k, v))
    kb = k.reshape(G, B, BLOCK, D // 2, 2).permute(0, 1, 3, 2, 4)     # [block][D/2][64][2]
    vb = v.reshape(G, B, BLOCK // 2, 2, D).permute(0, 1, 2, 4, 3)     # [block][32][D][2]
    return kb.reshape(G, B * BLOCK, D), vb.reshape(G, B * BLOCK, D)


def _from_blocked(kb: torch.Tensor, vb: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """_to_blocked's inverse: (G, P', D) blocked, P' a multiple of 64 -> the first n tokens (G, n, D), plain."""
    G, P, D = kb.shape
    B = P // BLOCK
    k = kb.reshape(G, B, D // 2, BLOCK, 2).permute(0, 1, 3, 2, 4).reshape(G, P, D)
    v = vb.reshape(G, B, BLOCK // 2, D, 2).permute(0, 1, 2, 4, 3).reshape(G, P, D)
    return k[:, :n], v[:, :n]


class SlotKVStore:
    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, budget_bytes: int,
                 max_slots: int, policy: StorePolicy = StorePolicy.ZEROED, blocked: bool = False) -> None:
        self.policy = policy
        self.zeroed = policy is StorePolicy.ZEROED
        self.blocked = blocked      # the native kernels' 64-key block layout (module docstring, Layout)
        self.shape = (kv_heads, head_dim)
        self.dtype = dtype
        self.budget_bytes = budget_bytes
        self.max_slots = max_slots
        self.bytes_per_token = layers * 2 * kv_heads * head_dim * torch.finfo(dtype).bits // 8
        self.k: list[torch.Tensor] = [self._empty(0, 0) for _ in range(layers)]
        self.v: list[torch.Tensor] = [self._empty(0, 0) for _ in range(layers)]
        self.occupants: dict[int, Occupant] = {}   # running slot -> what it holds the KV of
        self.needs: dict[int, int] = {}         # slot -> most tokens its sequence may reach
        self.touched: dict[int, int] = {}       # unzeroed: slot -> columns its past sequences wrote (pages held)
        # unzeroed, free slot -> (its first MIN_REUSE ids, (n,) int64 ids whose KV columns 0..n-1 hold), in
        # release order (oldest first); the first ids are a cheap first test in _match
        self.kept: dict[int, tuple[tuple[int, ...], torch.Tensor]] = {}

    def _empty(self, slots: int, columns: int) -> torch.Tensor:
        shape = (slots, self.shape[0], columns, self.shape[1])
        if self.blocked and not self.zeroed:
            return _untouched_zeros(shape, self.dtype)
        make = torch.zeros if self.zeroed else torch.empty
        return make(shape, dtype=self.dtype)

    @property
    def slots(self) -> int:
        return self.k[0].shape[0]

    @property
    def capacity(self) -> int:
        return self.k[0].shape[2]

    @property
    def lengths(self) -> dict[int, int]:
        """Running slot -> tokens stored (its occupant's `computed`)."""
        return {slot: o.computed for slot, o in self.occupants.items()}

    @property
    def nbytes(self) -> int:
        """Bytes the store holds: the running sequences' reservations and an unzeroed store's touched pages
        (what `budget_bytes` bounds)."""
        return self._held(self.needs) * self.bytes_per_token

    @property
    def usage(self) -> float:
        """Fraction of the budget the running sequences reserve (0..1; 0 when idle): for stats()."""
        return min(1.0, self._reserved(self.needs) * self.bytes_per_token / max(1, self.budget_bytes))

    def _columns_for(self, need: int) -> int:
        return max(self.capacity, _round_up(need, COLUMN_STEP))

    def _reserved(self, needs: dict[int, int]) -> int:
        """Columns (tokens' KV over all layers) that `needs` (slot -> need) running reserve: zeroed, each at the
        longest one's capacity; unzeroed, each its need or the pages its slot already holds if more."""
        if self.zeroed:
            return len(needs) * self._columns_for(max(needs.values())) if needs else 0
        return sum(max(self.touched.get(s, 0), n) for s, n in needs.items())

    def _held(self, needs: dict[int, int]) -> int:
        """Columns held with `needs` running: their reservations and the pages the free slots keep."""
        return self._reserved(needs) + sum(n for s, n in self.touched.items() if s not in needs)

    def admit(self, occupant: Occupant, need: int, prompt: list[int] | None = None) -> int | None:
        """A free slot for `occupant`, which may reach `need` tokens, or None when the budget or slots are full.
        With `prompt`, a free slot that kept the KV of its first tokens is taken, and `occupant.computed` is
        set to how many it holds; else to 0."""
        if len(self.needs) >= self.max_slots:
            return None
        reuse = self._match(prompt) if prompt is not None else None
        slot = reuse[0] if reuse is not None else self._fit(need)
        after = {**self.needs, slot: need}
        if self._held(after) * self.bytes_per_token > self.budget_bytes and self.needs:
            return None
        occupant.computed = reuse[1] if reuse is not None else 0
        self.needs[slot], self.occupants[slot] = need, occupant
        self.kept.pop(slot, None)
        slots = self.slots if slot < self.slots else self._more_slots()
        self._grow(max(slots, slot + 1), self._columns_for(max(after.values())))   # copies the reused columns too
        return slot

    def kept_head(self, prompt: list[int]) -> int:
        """The tokens of `prompt` a free slot's kept KV would give it at admission (0: none)."""
        reuse = self._match(prompt)
        return reuse[1] if reuse is not None else 0

    def _fit(self, need: int) -> int:
        """The free slot that adds the fewest new pages; among those, one keeping no tokens, else the one whose
        kept tokens are the oldest (vLLM's pool evicts its least recently freed blocks alike); then the
        smallest that covers the need (best fit)."""
        age = {s: i for i, s in enumerate(self.kept)}
        free = (s for s in range(self.max_slots) if s not in self.needs)
        return min(free, key=lambda s: (max(0, need - self.touched.get(s, 0)), age.get(s, -1),
                                        self.touched.get(s, 0), s))

    def _match(self, prompt: list[int]) -> tuple[int, int] | None:
        """(free slot, n): the slot whose kept ids share the longest head with `prompt`, n of them (at most all
        but the prompt's last token); a slot counts only if n >= MIN_REUSE and n is at least half of what it
        keeps (a short shared head is not worth another conversation's kept tokens: the prefix cache holds
        long shared heads). None when no slot does."""
        head = tuple(prompt[:MIN_REUSE])
        candidates = [(slot, held) for slot, (first, held) in self.kept.items() if first == head]
        if len(prompt) <= MIN_REUSE or not candidates:
            return None
        ids = torch.tensor(prompt[:-1], dtype=torch.long)
        best = None
        for slot, held in candidates:
            n = min(len(held), len(ids))
            differ = (held[:n] != ids[:n]).nonzero()
            shared = int(differ[0]) if len(differ) else n
            if shared >= max(MIN_REUSE, len(held) // 2) and (best is None or shared > best[1]):
                best = (slot, shared)
        return best

    def _more_slots(self) -> int:
        if not self.zeroed:
            return self.max_slots
        return min(self.max_slots, max(SLOT_STEP, 2 * self.slots))

    def release(self, slot: int, tokens: list[int] | None = None) -> None:
        """Free `slot`. `tokens`: ids of at least the tokens it stored (prompt + output); an unzeroed store
        keeps the first `lengths[slot]` of them (its occupant's `computed`) for a later prompt that starts with
        them."""
        self.needs.pop(slot, None)
        occupant = self.occupants.pop(slot, None)
        written = occupant.computed if occupant is not None else 0
        if not self.zeroed:                     # its pages stay: the next sequence in this slot reuses them
            self.touched[slot] = max(self.touched.get(slot, 0), written)
            if tokens is not None and written >= MIN_REUSE:
                self.kept[slot] = tuple(tokens[:MIN_REUSE]), torch.tensor(tokens[:written], dtype=torch.long)
        elif not self.needs:                    # an idle zeroed store gives its memory back
            self.k = [self._empty(0, 0) for _ in self.k]
            self.v = [self._empty(0, 0) for _ in self.v]

    def _grow(self, slots: int, columns: int) -> None:
        slots, columns = max(slots, self.slots), max(columns, self.capacity)
        if (slots, columns) == (self.slots, self.capacity):
            return
        lengths = self.lengths
        for layer in (self.k, self.v):
            for i, old in enumerate(layer):
                new = self._empty(slots, columns)
                for s, n in lengths.items():      # the running slots' stored columns, nothing else
                    n = _round_up(n, BLOCK) if self.blocked else n     # blocked: whole blocks
                    if n:
                        new[s, :, :n] = old[s, :, :n]
                layer[i] = new
        self.touched = lengths if not self.zeroed else {}
        self.kept = {}                                  # the free slots' columns were not copied

    def rows(self, slots: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """(T * kv_heads,) row indices, in a layer's (slots * kv_heads * capacity, head_dim) view, of the
        tokens at (slots[t], positions[t]) for every kv head, t-major: one index for all layers of a step."""
        heads = torch.arange(self.shape[0])
        return ((slots.unsqueeze(1) * self.shape[0] + heads) * self.capacity + positions.unsqueeze(1)).reshape(-1)

    def write(self, layer: int, rows: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store the step's new tokens: k, v (T, kv_heads, head_dim) at `rows` (from `rows`); one index_copy_
        of T x kv_heads rows each, nothing else moves. Plain layout only (a blocked store is written by the
        native rope_store)."""
        assert not self.blocked, "a blocked store is written by fused_ops.cpp's rope_store"
        self.k[layer].view(-1, self.shape[1]).index_copy_(0, rows, k.reshape(-1, self.shape[1]))
        self.v[layer].view(-1, self.shape[1]).index_copy_(0, rows, v.reshape(-1, self.shape[1]))

    def load_prefix(self, slot: int, layers: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Copy a cached head's KV (per layer (1, kv_heads, P, head_dim)) into columns 0..P-1 of `slot`; its
        occupant's `computed` becomes P."""
        for i, (k, v) in enumerate(layers):
            if self.blocked:                    # whole blocks: columns past P in the last one become zeros
                k, v = (t.unsqueeze(0) for t in _to_blocked(k[0], v[0]))
            n = k.shape[2]
            self.k[i][slot, :, :n] = k[0]
            self.v[i][slot, :, :n] = v[0]
        self.occupants[slot].computed = layers[0][0].shape[2]

    def copy_head(self, source: int, slot: int, n: int) -> None:
        """Columns 0..n-1 of running slot `source` copied into `slot` (shared_heads.py); its occupant's
        `computed` becomes n. Blocked: whole blocks, so the last one's columns past n hold the source's KV
        (finite values a kernel weighs by 0 until this slot's own tokens overwrite them)."""
        m = _round_up(n, BLOCK) if self.blocked else n
        for layer in (self.k, self.v):
            for t in layer:
                t[slot, :, :m] = t[source, :, :m]
        self.occupants[slot].computed = n

    def head(self, slot: int, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The first n tokens' KV of `slot`, per layer (1, kv_heads, n, head_dim), plain: views, or copies out
        of a blocked store."""
        if not self.blocked:
            return [(k[slot:slot + 1, :, :n], v[slot:slot + 1, :, :n]) for k, v in zip(self.k, self.v, strict=True)]
        m = _round_up(n, BLOCK)
        return [tuple(t.unsqueeze(0) for t in _from_blocked(k[slot, :, :m], v[slot, :, :m], n))   # type: ignore[misc]
                for k, v in zip(self.k, self.v, strict=True)]
