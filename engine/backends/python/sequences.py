"""A python model's sequences (Triton's sequence batcher, engine/repository/sequence.py): each live sequence
id has its instance (bound at START, round-robin), its implicit state and a lock that keeps its requests in
arrival order; a request without a sequence id, or one that continues a sequence never started, is the
client's error (400). END drops the sequence, and so does `max_sequence_idle_microseconds` of silence.

Invariant: an instance runs one `execute` at a time (its lock), so a sequence's requests never overlap and
the instance-held state of a model (Triton's direct strategy) stays consistent. The oldest strategy runs the
same way, one request per execution.
"""
from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from conch.engine.errors import InvalidRequest
from conch.engine.repository.sequence import SequenceBatching
from conch.engine.tensors.interface import Tensors


@dataclass
class _Sequence:
    instance: int
    state: Tensors
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class SequenceStep:
    """One request's place in its sequence: the tensors to add to its inputs and the instance to run on."""

    corrid: int | str
    end: bool
    instance: int
    extra: Tensors


class Sequences:
    def __init__(self, rules: SequenceBatching, instances: int, batched: bool, model: str) -> None:
        self.rules, self.instances, self.batched, self.model = rules, instances, batched, model
        self.locks = [asyncio.Lock() for _ in range(instances)]     # one execute per instance at a time
        self._live: dict[int | str, _Sequence] = {}
        self._next = itertools.cycle(range(instances))

    def correlation(self, parameters: dict[str, Any]) -> tuple[int | str, bool, bool]:
        corrid = parameters.get("sequence_id", 0)
        if corrid in (0, "", None) or isinstance(corrid, bool) or not isinstance(corrid, (int, str)):
            raise InvalidRequest(f"inference request to model '{self.model}' must specify a non-zero or "
                                 f"non-empty sequence_id (correlation ID)", param="sequence_id")
        return corrid, _flag(parameters, "sequence_start"), _flag(parameters, "sequence_end")

    def sequence(self, corrid: int | str, start: bool) -> _Sequence:
        """The sequence a request belongs to (a START begins it afresh)."""
        self._drop_idle()
        if start:
            self._live[corrid] = _Sequence(next(self._next), {s.input_name: s.initial(self.batched)
                                                            for s in self.rules.states})
        seq = self._live.get(corrid)
        if seq is None:
            raise InvalidRequest(f"inference request for sequence {corrid} to model '{self.model}' must specify "
                                 f"the START flag on the first request of the sequence", param="sequence_start")
        return seq

    def step(self, seq: _Sequence, corrid: int | str, start: bool, end: bool) -> SequenceStep:
        flags = {"CONTROL_SEQUENCE_START": start, "CONTROL_SEQUENCE_END": end, "CONTROL_SEQUENCE_READY": True}
        extra = {c.input_name: c.tensor(flags, corrid, self.batched) for c in self.rules.controls}
        return SequenceStep(corrid, end, seq.instance, {**extra, **seq.state})

    def finish(self, seq: _Sequence, step: SequenceStep, outputs: Tensors) -> Tensors:
        """Keeps the state outputs for the next request (not returned to the client); END drops the sequence."""
        for s in self.rules.states:
            if s.output_name in outputs:
                seq.state[s.input_name] = np.asarray(outputs[s.output_name])
        seq.last_used = time.monotonic()
        if step.end:
            self._live.pop(step.corrid, None)
        hidden = {s.output_name for s in self.rules.states}
        return {k: v for k, v in outputs.items() if k not in hidden}

    def _drop_idle(self) -> None:
        now = time.monotonic()
        for corrid in [c for c, s in self._live.items()
                       if now - s.last_used > self.rules.idle_seconds and not s.lock.locked()]:
            del self._live[corrid]


def _flag(parameters: dict[str, Any], key: str) -> bool:
    value = parameters.get(key, False)
    return value.lower() == "true" if isinstance(value, str) else bool(value)
