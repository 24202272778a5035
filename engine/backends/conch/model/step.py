"""One step of the flattened forward: the message flat_runner.py lays out and llama.py runs.

Invariant: the spans' tokens stand one after another in `ids` (span i at `offset`..`offset + n - 1`), and a
span's tokens 0..start-1 already have their KV in its slot.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch


@dataclass(frozen=True)
class Span:
    slot: int
    start: int        # position of the span's first token (tokens 0..start-1 are in the store)
    offset: int       # index of its first token in the flattened step
    n: int            # tokens this step


@dataclass(frozen=True)
class Step:
    ids: torch.Tensor        # (T,) token ids, spans laid out one after another
    positions: torch.Tensor  # (T,)
    slots: torch.Tensor      # (T,) the slot of each token
    spans: tuple[Span, ...]
    logits_at: torch.Tensor  # (R,) flattened indices whose logits are wanted: each sampling span's last token,
                             # or its last 1 + k where it ends in k proposed tokens
    embeds_at: Optional[torch.Tensor] = None   # (E,) flattened indices whose input embedding is given (an image's
    embeds: Optional[torch.Tensor] = None      # (E, hidden) placeholder tokens: model/vision.py), else None
    sees: Optional[torch.Tensor] = None        # (T,) the last position each token attends to where some see past
                                               # themselves (an image's tokens, both ways: Gemma 3), else None
