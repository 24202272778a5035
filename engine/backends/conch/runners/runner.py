"""The runner contract: what the scheduler and the backend ask of a model runner.

Two runners keep it: `FlatRunner` (flat_runner.py), Conch's own forward for the Llama family over the slot KV
store, prompts in chunks; and `HFRunner` (hf_runner.py), the model's HF forward for any other architecture,
prompts whole, its rows left-padded. The scheduler is built once with the runner and calls only these methods;
every call comes from the engine thread, except `kv_usage`, which stats() reads from the event loop.

Invariant: a sequence the runner admitted holds its KV (in a slot or a row) until `release`; `seq.computed`
is the one count of the tokens whose KV it holds (the runner sets it at admission and at the first chunk, the
scheduler after each step).
"""
from __future__ import annotations

from typing import Any, Protocol

import torch

from conch.engine.backends.conch.core.batch import Batch
from conch.engine.backends.conch.kv.prefix_cache import PrefixCache
from conch.engine.backends.conch.core.sequence import Sequence


class Runner(Protocol):
    model: Any                # the loaded HF model (prompt logprobs run its own forward over the whole prompt)
    prefixes: PrefixCache     # the KV of long prompt heads seen before (budget 0: off)
    whole_prompts: bool       # True: a newcomer's prompt is prefilled whole in the step that admits it and its
                              # KV row follows `Batch.keep`; False: prompts in chunks under a step's token budget

    def admit(self, seq: Sequence) -> bool:
        """Room for `seq`'s KV, or False (the scheduler tries again next step); may advance `seq.computed`
        past tokens whose KV it already holds (a kept slot)."""
        ...

    def first_chunk(self, seq: Sequence) -> None:
        """Before `seq`'s first prompt chunk is computed: it may advance `seq.computed` past a cached head."""
        ...

    def waits(self, seq: Sequence, prefilling: list[Sequence]) -> bool:
        """Whether newcomer `seq` should stay waiting this step: one of `prefilling` (running, or admitted this
        step, and still prefilling) will compute a head of its prompt that its first chunk can then copy."""
        ...

    def release(self, seq: Sequence) -> None:
        """`seq` left the batch (finished, aborted, or its step failed): its KV is freed."""
        ...

    def forward(self, batch: Batch) -> torch.Tensor:
        """Logits (R, V) float32, in `batch.sampling` order: a row per sequence, and one more per token it
        proposed (`batch.drafts`, which a runner with `whole_prompts` is never given); stores the new KV."""
        ...

    @property
    def kv_usage(self) -> float:
        """Fraction 0..1 of the runner's KV room the running sequences hold (stats())."""
        ...
