"""What a decoding sequence proposes to verify in a step: the tokens its grammar forces next (llguidance's
`compute_ff_tokens`), then the prompt lookup's continuation (ngram.py) after them.

A proposal is only a draft: the step computes logits at the sequence's last token and at each proposed one,
and verify.py keeps a proposed token only where sampling that row picks it. Forced tokens are drafts too: a
library tokenizes the forced text its own way, which greedy decoding under the mask need not follow.
"""
from __future__ import annotations

from dataclasses import dataclass

from conch.engine.backends.conch.core.sequence import Sequence
from conch.engine.backends.conch.speculation.ngram import NgramIndex


@dataclass(frozen=True)
class Speculation:
    """The model config's `speculative_*` and `prompt_lookup_*` keys."""

    tokens: int = 0              # most tokens proposed a step per sequence (0: off)
    lookup_min: int = 2          # the shortest suffix the prompt lookup matches
    lookup_max: int = 4          # the longest
    grammar: bool = True         # propose the tokens a grammar forces
    max_batch: int = 4           # no proposals in a step with more decoding sequences than this

    def drafts(self, decode: list[Sequence]) -> tuple[tuple[int, ...], ...]:
        """Per decoding sequence, the tokens it proposes this step (() for none)."""
        if self.tokens <= 0 or len(decode) > self.max_batch:
            return tuple(() for _ in decode)
        return tuple(self.draft(seq) for seq in decode)

    def draft(self, seq: Sequence) -> tuple[int, ...]:
        """Up to `tokens` proposals (or the request's `speculative_tokens`, if fewer), fewer where the sequence's
        length limits leave less room: each step emits its accepted proposals and one token more, and never
        writes KV past the sequence's reservation."""
        asked = seq.params.speculative_tokens
        k = min(self.tokens, seq.room - 1, self.tokens if asked is None else asked)
        if k <= 0:
            return ()
        forced = list(seq.matcher.forced_tokens()[:k]) if self.grammar and seq.matcher is not None else []
        if seq.lookup is None:
            seq.lookup = NgramIndex(self.lookup_min, self.lookup_max)
        return tuple(forced + seq.lookup.propose(seq.prompt_ids + seq.output_ids, k - len(forced), forced))
