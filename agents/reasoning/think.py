"""`<think> ... </think>` then the answer: Qwen3, QwQ, DeepSeek-R1, GLM-4.5, Kimi-K2-Thinking, Granite's
thinking mode and most open reasoning models.

    <think>
    The user wants the weather; I should call get_weather.
    </think>

    <tool_call>...</tool_call>

The whitespace right after `</think>` (and before a reply's first text) belongs to neither part. A block that
never closes (the budget or max_tokens cut it) is reasoning to the end. In ANSWER the text is content as it
is, tags included.
"""
from __future__ import annotations

from conch.agents.reasoning.base import Phase, ReasoningDelta, ReasoningEvent, ReasoningFormat, ReasoningParser
from conch.agents.tool_formats.reading.content import held_from
from conch.agents.tools.types import ContentDelta

START, END = "<think>", "</think>"


class ThinkParser(ReasoningParser):
    def __init__(self, phase: Phase) -> None:
        self._phase = phase
        self._strip = False        # drop the whitespace that follows an end tag,
        self._lead = phase is Phase.THINKING   # and the whitespace that opens the reasoning

    def _run(self) -> list[ReasoningEvent]:
        out: list[ReasoningEvent] = []
        while True:
            if self._phase is Phase.BEFORE and not self._before():
                break
            if self._phase is Phase.THINKING and not self._thinking(out):
                break
            if self._phase is Phase.ANSWER:
                self._answer(out)
                break
        return out

    def _before(self) -> bool:
        """Whitespace, then either the start tag (THINKING) or anything else (ANSWER); False to wait."""
        head = self._buf.lstrip()
        if head.startswith(START):
            self._buf, self._phase, self._lead = head[len(START):], Phase.THINKING, True
            return True
        if (START.startswith(head) or not head) and not self._final:
            return False
        self._buf, self._phase = head, Phase.ANSWER
        return True

    def _thinking(self, out: list[ReasoningEvent]) -> bool:
        if self._lead:
            self._buf = self._buf.lstrip()
            self._lead = not self._buf and not self._final
            if self._lead:
                return False
        at = self._buf.find(END)
        if at >= 0:
            _add(out, ReasoningDelta(self._buf[:at].rstrip()))
            self._buf, self._phase, self._strip = self._buf[at + len(END):], Phase.ANSWER, True
            return True
        keep = len(self._buf) if self._final else held_from(self._buf, 0, (END,))
        _add(out, ReasoningDelta(self._buf[:keep]))
        self._buf = self._buf[keep:]
        return False

    def _answer(self, out: list[ReasoningEvent]) -> None:
        if self._strip:
            self._buf = self._buf.lstrip()
            self._strip = not self._buf and not self._final
        if not self._strip:
            _add(out, ContentDelta(self._buf))
            self._buf = ""


def _add(out: list[ReasoningEvent], event: ReasoningEvent) -> None:
    if event.text:
        out.append(event)


class ThinkFormat(ReasoningFormat):
    name = "think"
    start = START
    end = END
    forced_end = END + "\n\n"

    def new_parser(self, phase: Phase) -> ReasoningParser:
        return ThinkParser(phase)
