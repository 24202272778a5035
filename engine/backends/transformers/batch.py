"""One step's batch: the message the scheduler hands the runner and the sampler.

Invariant: `spans[i]` belongs to `seqs[i]` (the decode rows first, then the prefill chunks), and a sequence is
in `sampling` exactly when its span reaches its last token, so it gets a token this step.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.backends.transformers.sequence import Sequence


@dataclass(frozen=True)
class Batch:
    keep: list[int]          # rows of the previous step's batch that continue, in order (the HF runner's rows)
    decode: list[Sequence]   # sequences past their prompt: one token each
    prefill: list[Sequence]  # sequences with prompt tokens to compute: a chunk each, after the decode rows
    spans: tuple[tuple[int, int], ...] = ()   # per seq of `seqs`: (first token computed, tokens computed)
    sampling: list[Sequence] = field(default_factory=list)   # those whose span reaches their last token:
                                                            # they get a token this step, in `seqs` order

    @property
    def seqs(self) -> list[Sequence]:
        return self.decode + self.prefill

    @property
    def empty(self) -> bool:
        return not self.decode and not self.prefill


def make_batch(keep: list[int], decode: list[Sequence], prefill: list[tuple[Sequence, int]]) -> Batch:
    """The batch of `decode` rows (one token each) and `prefill` chunks ((sequence, tokens) each)."""
    spans = tuple([(s.num_tokens - 1, 1) for s in decode] + [(s.computed, n) for s, n in prefill])
    seqs = decode + [s for s, _ in prefill]
    sampling = [s for s, (start, n) in zip(seqs, spans, strict=True) if start + n == s.num_tokens]
    return Batch(keep, decode, [s for s, _ in prefill], spans, sampling)
