"""A runner without a model, for the scheduler's tests: it keeps the Runner contract (runner.py) and records
what the scheduler asked of it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from conch.engine.backends.conch.core.batch import Batch
from conch.engine.backends.conch.kv.prefix_cache import PrefixCache
from conch.engine.backends.conch.core.sequence import Sequence


@dataclass
class FakeRunner:
    whole_prompts: bool = False
    room: int | None = None                        # sequences it admits at the most; None: any
    on_first_chunk: Callable[[Sequence], None] = lambda seq: None
    wait_for: Callable[[Sequence, list[Sequence]], bool] = lambda seq, prefilling: False
    released: list[Sequence] = field(default_factory=list)
    model: object = None
    prefixes: PrefixCache = field(default_factory=lambda: PrefixCache(0))
    kv_usage: float = 0.0

    def admit(self, seq: Sequence) -> bool:
        if self.room is None:
            return True
        if not self.room:
            return False
        self.room -= 1
        return True

    def first_chunk(self, seq: Sequence) -> None:
        self.on_first_chunk(seq)

    def waits(self, seq: Sequence, prefilling: list[Sequence]) -> bool:
        return self.wait_for(seq, prefilling)

    def release(self, seq: Sequence) -> None:
        self.released.append(seq)

    def forward(self, batch: Batch) -> torch.Tensor:
        return torch.zeros(len(batch.sampling), 8)
