"""One step's batch: the message the scheduler hands the runner and the sampler.

Invariant: `spans[i]` belongs to `seqs[i]` (the decode rows first, then the prefill chunks), and a sequence is
in `sampling` exactly when its span reaches its last token, so it gets a token this step. A decode row may
also carry proposed tokens (`drafts`, speculation/): the runner computes them after its last token, with a
logits row at each, and it gets up to 1 + len(draft) tokens this step.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from conch.engine.backends.conch.core.sequence import Sequence


@dataclass(frozen=True)
class Batch:
    keep: list[int]          # rows of the previous step's batch that continue, in order (the HF runner's rows)
    decode: list[Sequence]   # sequences past their prompt: one token each
    prefill: list[Sequence]  # sequences with prompt tokens to compute: a chunk each, after the decode rows
    spans: tuple[tuple[int, int], ...] = ()   # per seq of `seqs`: (first token computed, tokens computed)
    sampling: list[Sequence] = field(default_factory=list)   # those whose span reaches their last token:
                                                            # they get a token this step, in `seqs` order
    drafts: tuple[tuple[int, ...], ...] = ()  # per decode row: tokens proposed after its last one (() none;
                                              # missing at the end: none)

    @property
    def seqs(self) -> list[Sequence]:
        return self.decode + self.prefill

    def draft(self, i: int) -> tuple[int, ...]:
        """The tokens `seqs[i]` proposed this step."""
        return self.drafts[i] if i < len(self.drafts) else ()

    @property
    def empty(self) -> bool:
        return not self.decode and not self.prefill


def make_batch(keep: list[int], decode: list[Sequence], prefill: list[tuple[Sequence, int]],
               drafts: tuple[tuple[int, ...], ...] = ()) -> Batch:
    """The batch of `decode` rows (their last token, and `drafts[i]` if given) and `prefill` chunks
    ((sequence, tokens) each)."""
    spans = tuple([(s.num_tokens - 1, 1) for s in decode] + [(s.computed, n) for s, n in prefill])
    seqs = decode + [s for s, _ in prefill]
    sampling = [s for s, (start, n) in zip(seqs, spans, strict=True) if start + n == s.num_tokens]
    return Batch(keep, decode, [s for s, _ in prefill], spans, sampling, drafts)
