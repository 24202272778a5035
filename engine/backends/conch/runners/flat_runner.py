"""Runs a step of the Llama family through Conch's own flattened forward (llama.py) over a SlotKVStore.

A sequence gets a slot when the scheduler admits it (`admit`: refused when the KV budget is full): a free
slot that still holds its prompt's head if one does (the last turn of its conversation; slot_store.py), else
the KV of a cached prompt head is copied into its slot once (prefix caching). It frees the slot when it
leaves (`release`), which keeps its tokens' KV there for the next turn. Each step lays the batch's spans
(decode rows, prefill chunks) out as one flat token list.
"""
from __future__ import annotations

import logging
from typing import Any

import torch

from conch.engine.backends.conch.core.batch import Batch
from conch.engine.backends.conch.kv import shared_heads
from conch.engine.backends.conch.kv.slot_store import SlotKVStore, StorePolicy
from conch.engine.backends.conch.model.llama import LlamaForward
from conch.engine.backends.conch.kv.prefix_cache import PrefixCache
from conch.engine.backends.conch.core.sequence import Sequence
from conch.engine.backends.conch.model.step import Span, Step
from conch.engine.errors import BackendUnavailable

log = logging.getLogger(__name__)


class FlatRunner:
    """Keeps the Runner contract (runner.py). Owns the model's flattened forward and the KV store. Not
    thread-safe: the engine loop thread only."""

    whole_prompts = False

    def __init__(self, model: Any, max_slots: int, kv_budget_bytes: int, prefix_cache: PrefixCache,
                 policy: StorePolicy | None = None, batch_invariant: bool = False) -> None:
        """`policy` None: RESERVED when native kernels read the store (they never read past what a slot's
        length makes valid), else ZEROED (SDPA masks what it reads). The store is blocked where the native
        kernels serve (Kernels.blocked). `batch_invariant`: llama.py's Numerics."""
        c = model.config
        self.model = model
        self.forward_pass = LlamaForward(model, batch_invariant)
        kernels = self.forward_pass.kernels
        if batch_invariant and not kernels.blocked:
            log.warning("batch_invariant: no native prefill kernel for this model here (bf16, head_dim 64 or 128, "
                        "AVX512-BF16, a C++ compiler): SDPA serves, and a row's last bits may follow its batch")
        native = kernels.blocked or kernels.decode is not None
        if policy is None:
            policy = StorePolicy.RESERVED if native else StorePolicy.ZEROED
        elif policy is StorePolicy.RESERVED and not native:
            raise BackendUnavailable("kv_store 'reserved' needs the native attention kernels (bfloat16, a C++ "
                                     "compiler, CONCH_NATIVE_KERNELS not 0): SDPA would read its unwritten columns")
        self.kv = SlotKVStore(c.num_hidden_layers, c.num_key_value_heads, self.forward_pass.head_dim,
                              self.forward_pass.dtype, kv_budget_bytes, max_slots, policy, kernels.blocked)
        self.prefixes = prefix_cache
        self.vision: Any = None                 # a vision-language model's VisionTower (model/vision.py), or None

    @property
    def kv_usage(self) -> float:
        """Fraction of the KV budget reserved by the running sequences (for the backend's stats())."""
        return self.kv.usage

    def admit(self, seq: Sequence) -> bool:
        """A slot for `seq`; with prefix caching on, one that still holds its prompt's head if a finished
        sequence left one (the conversation's last turn): `seq` starts past those tokens."""
        slot = self.kv.admit(seq, seq.kv_need, seq.key_ids if self.prefixes.enabled else None)
        if slot is None:
            return False
        seq.slot, seq.cached = slot, seq.computed
        return True

    def first_chunk(self, seq: Sequence) -> None:
        """Before its first chunk: the longest cached head of its prompt, copied into its slot once if longer
        than what the slot holds (the step computes the rest), then a longer one a running sequence's slot
        holds (shared_heads.py: prompts that arrived together). Looked up now rather than at admission, so that
        prompts admitted together behind one sharing their head (an agent's system prompt and tools) find it
        once that one has computed it."""
        assert seq.slot is not None
        hit = self.prefixes.lookup(seq.key_ids, held=seq.computed)
        if hit is not None:
            cached, layers = hit
            self.kv.load_prefix(seq.slot, layers)       # seq.computed becomes `cached`
            seq.cached = cached
        sibling = shared_heads.source(seq, self.kv.occupants.items()) if self.prefixes.enabled else None
        if sibling is not None:                         # a running sequence's slot holds a longer head
            slot, n = sibling
            self.prefixes.hit_tokens += n - seq.computed
            self.kv.copy_head(slot, seq.slot, n)        # seq.computed becomes n
            seq.cached = n

    def waits(self, seq: Sequence, prefilling: list[Sequence]) -> bool:
        """Whether newcomer `seq` should wait for a prefilling sequence to compute the head they share
        (shared_heads.py), with prefix caching on: not where a kept slot or the prefix cache already holds as
        much of its prompt (a conversation's next turn beside a newcomer with the same system prompt)."""
        if not self.prefixes.enabled:
            return False
        n = shared_heads.awaited(seq, prefilling)
        return n > 0 and n > max(self.kv.kept_head(seq.key_ids), self.prefixes.cached(seq.key_ids))

    def release(self, seq: Sequence) -> None:
        if seq.slot is not None:
            self.kv.release(seq.slot, seq.key_ids + seq.output_ids if self.prefixes.enabled else None)
            seq.slot = None

    def forward(self, batch: Batch) -> torch.Tensor:
        """Logits (R, V) float32: per sequence of `batch.sampling`, in order, a row at its last token and one at
        each token it proposed (`batch.drafts`); the scheduler's update then counts the spans' tokens as
        computed, and the proposals it accepted."""
        step = self._layout(batch)
        if self.vision is not None:
            step = self.vision.splice(step, batch.seqs, batch.spans)
        logits = self.forward_pass(step, self.kv)
        for seq, (start, n) in zip(batch.seqs, batch.spans, strict=True):
            if start + n <= len(seq.prompt_ids) and n > 1:
                self._remember(seq, start + n)
        return logits

    def _layout(self, batch: Batch) -> Step:
        """A decode row's span holds its last token and its proposals (they need the sequence's room in the
        store: Speculation.draft keeps them within its reservation)."""
        ids: list[int] = []
        spans, wanted = [], []    # type: list[Span], list[int]
        for i, (seq, (start, n)) in enumerate(zip(batch.seqs, batch.spans, strict=True)):
            assert seq.slot is not None
            draft = batch.draft(i)
            spans.append(Span(seq.slot, start, len(ids), n + len(draft)))
            ids += seq.tokens(start, n) + list(draft)
            if start + n == seq.num_tokens:
                wanted.extend(range(len(ids) - 1 - len(draft), len(ids)))
        positions = torch.cat([torch.arange(s.start, s.start + s.n) for s in spans])
        slots = torch.cat([torch.full((s.n,), s.slot, dtype=torch.long) for s in spans])
        return Step(torch.tensor(ids), positions, slots, tuple(spans), torch.tensor(wanted, dtype=torch.long))

    def _remember(self, seq: Sequence, computed: int) -> None:
        """Offer the prompt head computed so far to the prefix cache (block-aligned; it copies)."""
        head = seq.key_ids[:computed]
        if self.prefixes.wants(head):
            assert seq.slot is not None
            self.prefixes.store(head, self.kv.head(seq.slot, len(head)))
