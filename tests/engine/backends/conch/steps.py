"""Hand-laid flattened steps for tests that drive LlamaForward over a SlotKVStore directly."""
from __future__ import annotations

import torch

from conch.engine.backends.conch.model.step import Span, Step


class Occupant:
    computed = 0        # a slot's occupant (a Sequence, in the runner)


def make_step(spans: list[tuple[int, int, list[int]]], want: list[int]) -> Step:
    """spans: (slot, start, ids) laid out one after another; want: flattened indices whose logits are kept."""
    ids: list[int] = []
    positions: list[int] = []
    slots: list[int] = []
    out = []
    for slot, start, toks in spans:
        out.append(Span(slot, start, len(ids), len(toks)))
        ids += toks
        positions += range(start, start + len(toks))
        slots += [slot] * len(toks)
    return Step(torch.tensor(ids), torch.tensor(positions), torch.tensor(slots), tuple(out), torch.tensor(want))
