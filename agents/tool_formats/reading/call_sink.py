"""One call's way out: turns a call's name and canonical argument pieces into ToolCallDeltas.

Commit policy (the only place it lives):
  - held (eager=False): nothing leaves before `complete()`, i.e. before the call's own text has been seen
    whole and valid; then the first delta and the arguments leave together. Text that turns out not to be a
    valid call can therefore still be given back as content, and streaming always equals `parse`.
  - eager: the first delta leaves as soon as the name is known and the arguments have begun; argument
    fragments follow as the reader certifies them. If the call's text later breaks (a length cut, a model
    that escaped its grammar), what was sent stands, as OpenAI's own stream does on finish_reason "length".
Invariants: one first delta per call, carrying id and name and an empty fragment; the fragments concatenate
to the call's canonical arguments; every delta goes, in order, onto the shared `out` list.
"""
from __future__ import annotations

from conch.agents.tools.types import StreamEvent, ToolCallDelta, new_call_id


class CallSink:
    def __init__(self, index: int, eager: bool, out: list[StreamEvent]) -> None:
        self.index = index
        self.name: str | None = None
        self.committed = False
        self._eager = eager
        self._pending: list[str] = []  # argument text not yet sent
        self._out = out

    def set_name(self, name: str) -> None:
        self.name = name
        self._maybe_commit()

    def add_arguments(self, piece: str) -> None:
        if not piece:
            return
        if self.committed:
            self._out.append(ToolCallDelta(self.index, None, None, piece))
        else:
            self._pending.append(piece)
            self._maybe_commit()

    def complete(self) -> None:
        """The call's text is whole and valid (its name set, its arguments all added)."""
        self._commit()

    def _maybe_commit(self) -> None:
        if self._eager and self.name is not None and self._pending:
            self._commit()

    def _commit(self) -> None:
        if self.committed:
            return
        assert self.name is not None, "a call is committed only once its name is known"
        self.committed = True
        self._out.append(ToolCallDelta(self.index, new_call_id(), self.name, ""))
        pending, self._pending = "".join(self._pending), []
        if pending:
            self._out.append(ToolCallDelta(self.index, None, None, pending))
