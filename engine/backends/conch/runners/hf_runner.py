"""Runs the model through its HF forward (any architecture outside flat_runner.py's Llama family, or a config's
`runner: hf`): batched prefill of whole prompts, left-padded, and one batched decode step for the running batch.
"""
from __future__ import annotations

import inspect

import torch
from transformers import DynamicCache, PreTrainedModel

from conch.engine.backends.conch.core.batch import Batch
from conch.engine.backends.conch.kv.padded_kv import PaddedKV, kv, layers
from conch.engine.backends.conch.kv.prefix_cache import PrefixCache
from conch.engine.backends.conch.core.sequence import Sequence


class HFRunner:
    """Keeps the Runner contract (runner.py) with `whole_prompts`. Owns the model and the running batch's
    left-padded KV. Not thread-safe: the engine loop thread only, but for `kv_usage`."""

    whole_prompts = True

    def __init__(self, model: PreTrainedModel, pad_id: int, prefix_cache: PrefixCache, room_tokens: int) -> None:
        """`room_tokens`: the most tokens the batch can hold (max_batch_size x context_length), what
        `kv_usage` measures against; the padded KV grows per step, its padding not counted."""
        self.model = model
        self.pad_id = pad_id
        self.kv = PaddedKV()
        self.prefixes = prefix_cache
        self.room_tokens = room_tokens
        self._held: list[Sequence] = []        # admitted and not released: their rows are the padded KV's
        # transformers renamed forward's `past_key_values` to `cache` (5.2x); an older release ignores `cache`
        # in its **kwargs and never fills the KV, so the name is the one this model's forward takes
        self._cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    @property
    def kv_usage(self) -> float:
        """The tokens (prompt + output) whose KV the running sequences hold, over `room_tokens`."""
        held = sum(seq.num_tokens for seq in list(self._held) if not seq.status.is_finished)
        return min(1.0, held / max(1, self.room_tokens))

    def admit(self, seq: Sequence) -> bool:
        """Always room: the padded KV grows with the batch (`max_batch_size` bounds it)."""
        self._held = self._held + [seq]         # rebound, not appended: kv_usage reads it from the event loop
        return True

    def first_chunk(self, seq: Sequence) -> None:
        """Never called: a whole prompt is one chunk, its cached head looked up in `prefill`."""

    def waits(self, seq: Sequence, prefilling: list[Sequence]) -> bool:
        """Never called (prompts whole): newcomers never wait."""
        return False

    def release(self, seq: Sequence) -> None:
        """Its row goes at the next forward (`Batch.keep`); once none is held, the padded KV is dropped."""
        self._held = [s for s in self._held if s is not seq]
        if not self._held:
            self.kv.keep([])

    def forward(self, batch: Batch) -> torch.Tensor:
        """Logits (len(batch.seqs), V): the decode rows first, then the newcomers, as in `batch.seqs`."""
        self.kv.keep(batch.keep)
        parts = []
        if batch.decode:
            parts.append(self.decode([seq.last_token for seq in batch.decode]))
        if batch.prefill:
            parts.append(self.prefill([seq.prompt_ids for seq in batch.prefill]))
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def prefill(self, prompts: list[list[int]]) -> torch.Tensor:
        """Prefill prompts and append them to the batch, in order. Returns (k, V) logits.

        A prompt whose head is in the prefix cache is prefilled alone from that head; runs of the others
        are prefilled together, left-padded.
        """
        parts, misses = [], []
        for prompt in prompts:
            hit = self.prefixes.lookup(prompt)
            if hit is None:
                misses.append(prompt)
                continue
            if misses:
                parts.append(self._prefill_together(misses))
                misses = []
            parts.append(self._prefill_from_prefix(prompt, *hit))
        if misses:
            parts.append(self._prefill_together(misses))
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    @torch.inference_mode()
    def _prefill_from_prefix(self, prompt: list[int], cached: int, cached_layers) -> torch.Tensor:
        cache = DynamicCache(config=self.model.config)
        for layer, (k, v) in zip(layers(cache), cached_layers, strict=True):
            # Shared, not copied: DynamicLayer.update and PaddedKV only ever build new tensors (cat,
            # index_select), so nothing writes into the prefix cache's tensors.
            layer.lazy_initialization(k, v)
            layer.keys, layer.values = k, v
        rest = torch.tensor(prompt[cached:]).unsqueeze(0)          # (1, L - P)
        mask = torch.ones((1, len(prompt)), dtype=torch.long)
        where = torch.arange(cached, len(prompt))
        out = self.model(input_ids=rest, attention_mask=mask, position_ids=where.unsqueeze(0),
                         **{self._cache_kw: cache}, use_cache=True, cache_position=where,
                         logits_to_keep=1)
        self.kv.merge(cache, mask)
        return out.logits[:, -1, :].float()

    @torch.inference_mode()
    def _prefill_together(self, prompts: list[list[int]]) -> torch.Tensor:
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt):] = torch.tensor(prompt)
            mask[row, width - len(prompt):] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache(config=self.model.config)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                         **{self._cache_kw: cache}, use_cache=True, logits_to_keep=1)
        self._remember(prompts, cache, width)
        self.kv.merge(cache, mask)
        return out.logits[:, -1, :].float()

    def _remember(self, prompts: list[list[int]], cache: DynamicCache, width: int) -> None:
        """Offer each long prompt's KV (its real, left-padded columns) to the prefix cache."""
        for row, prompt in enumerate(prompts):
            if self.prefixes.wants(prompt):
                start = width - len(prompt)
                self.prefixes.store(prompt, [(keys[row:row + 1, :, start:], values[row:row + 1, :, start:])
                                             for keys, values in map(kv, layers(cache))])

    @torch.inference_mode()
    def decode(self, last_tokens: list[int]) -> torch.Tensor:
        """One token for every row of the batch, in row order. Returns (B, V) logits."""
        assert len(last_tokens) == self.kv.batch_size
        positions = self.kv.mask.sum(-1, keepdim=True)            # (B, 1): index of the new token
        past = self.kv.length
        mask = self.kv.extend_mask()                               # (B, T + 1)
        ids = torch.tensor(last_tokens, dtype=torch.long).unsqueeze(-1)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                         **{self._cache_kw: self.kv.cache}, use_cache=True,
                         cache_position=torch.arange(past, past + 1), logits_to_keep=1)
        return out.logits[:, -1, :].float()
