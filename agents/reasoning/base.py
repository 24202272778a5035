"""A reasoning format: how a model marks its thinking off from its answer, and the reader that splits the
model's text into the two.

A model's format is chosen from its chat template (agents/reasoning/__init__.py's `reasoning_for_template`).
Where a reply starts is read from the rendered prompt (`start_phase`): a prompt that ends inside an open
thinking block (DeepSeek-R1, Qwen3 thinking templates) starts in THINKING; one that ends after a closed, empty
block (Qwen3 with enable_thinking false) in ANSWER; any other in BEFORE, where the model may open a block or
answer at once. That is how a call or a JSON answer is never swallowed as reasoning when thinking is off.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar, Union

from conch.agents.tools.types import ContentDelta


class Phase(enum.IntEnum):
    BEFORE = 0     # nothing read yet: the model may open a thinking block or answer at once
    THINKING = 1
    ANSWER = 2


@dataclass(frozen=True)
class ReasoningDelta:
    """Text of the model's reasoning (never part of the answer)."""

    text: str


ReasoningEvent = Union[ReasoningDelta, ContentDelta]


class ReasoningParser:
    """One per choice: feed() model text, get reasoning and answer (content) events in order. The text
    so far is `_buf`; `_final` is set once no more comes; `_run` reads what it can and returns its events."""

    _buf: str = ""
    _final: bool = False

    def feed(self, text: str) -> list[ReasoningEvent]:
        self._buf += text
        return self._run()

    def finish(self) -> list[ReasoningEvent]:
        self._final = True
        return self._run()

    def _run(self) -> list[ReasoningEvent]:
        raise NotImplementedError


@dataclass(frozen=True)
class ReasoningFormat:
    """`start` opens a thinking block and `end` closes it (as the model writes them); `forced_end` is the text
    the engine forces when a thinking budget runs out (the end, then the separator the template writes)."""

    name: ClassVar[str]
    start: ClassVar[str]
    end: ClassVar[str]
    forced_end: ClassVar[str]

    def start_phase(self, prompt: str) -> Phase:
        tail = prompt.rstrip()
        if tail.endswith(self.start):
            return Phase.THINKING
        if tail.endswith(self.end):
            return Phase.ANSWER
        return Phase.BEFORE

    def new_parser(self, phase: Phase) -> ReasoningParser:
        raise NotImplementedError

    def template_switch(self, enabled: bool) -> dict[str, object]:
        """Chat-template variables that turn the model's thinking on or off (Qwen3's `enable_thinking`,
        DeepSeek-V3.1's `thinking`); a template ignores those it does not read."""
        return {"enable_thinking": enabled, "thinking": enabled}
