"""OpenAI harmony (gpt-oss): the reply is a run of messages, each a header then a body, and the channel in the
header says what the body is.

    <|channel|>analysis<|message|>The user wants the weather...<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "X"}<|call|>
    <|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>

  - `analysis`: reasoning, up to `<|end|>`;
  - `final`, and commentary without a recipient (a preamble): the answer, its closing token dropped;
  - commentary addressed to a function: passed on whole, markup included, as answer text, for the harmony
    tool parser (agents/tool_formats/harmony.py) to read as a call.
Text that does not open a message (a model that answers plainly) is the answer as it is. A header longer than
HEADER_LIMIT characters is not one: from there the text is the answer as it is.
"""
from __future__ import annotations

import re

from conch.agents.reasoning.base import Phase, ReasoningDelta, ReasoningEvent, ReasoningFormat, ReasoningParser
from conch.agents.tool_formats.harmony import CALL, CHANNEL, END, HEADER_LIMIT, MESSAGE, START
from conch.agents.tool_formats.reading.content import WHITESPACE
from conch.agents.tools.types import ContentDelta

RETURN = "<|return|>"
_CHANNEL_NAME = re.compile(re.escape(CHANNEL) + r"\s*(\w+)")


class HarmonyParser(ReasoningParser):
    def __init__(self, phase: Phase) -> None:
        self._state = self._body_state(ReasoningDelta, (END,), keep_end=False) if phase is Phase.THINKING \
            else self._header

    def _run(self) -> list[ReasoningEvent]:
        out: list[ReasoningEvent] = []
        while self._state(out):
            pass
        return [e for e in out if e.text]

    def _header(self, out: list[ReasoningEvent]) -> bool:
        """At a message's start: a header up to `<|message|>` picks the body's reader; anything else is plain."""
        head = self._buf.lstrip(WHITESPACE)
        self._buf = head
        if not head:
            return False
        opens = head.startswith((START, CHANNEL))
        if not opens and (self._final or not (START.startswith(head) or CHANNEL.startswith(head))):
            self._state = self._plain
            return True
        at = head.find(MESSAGE, 0, HEADER_LIMIT + len(MESSAGE))
        if at < 0:
            if self._final or len(head) >= HEADER_LIMIT + len(MESSAGE):
                self._state = self._plain
                return True
            return False
        header, self._buf = head[:at], head[at + len(MESSAGE):]
        channel = _CHANNEL_NAME.search(header)
        name = channel.group(1) if channel else ""
        if name == "analysis":
            self._state = self._body_state(ReasoningDelta, (END,), keep_end=False)
        elif "to=" in header:
            out.append(ContentDelta(header + MESSAGE))
            self._state = self._body_state(ContentDelta, (CALL, END), keep_end=True)
        else:
            self._state = self._body_state(ContentDelta, (RETURN, END), keep_end=False)
        return True

    def _body_state(self, kind: type, ends: tuple[str, ...], *, keep_end: bool):
        def body(out: list[ReasoningEvent]) -> bool:
            found = [(self._buf.find(e), e) for e in ends if e in self._buf]
            if found:
                at, end = min(found)
                out.append(kind(self._buf[:at] + (end if keep_end else "")))
                self._buf, self._state = self._buf[at + len(end):], self._header
                return True
            keep = len(self._buf) if self._final else _held(self._buf, ends)
            out.append(kind(self._buf[:keep]))
            self._buf = self._buf[keep:]
            return False
        return body

    def _plain(self, out: list[ReasoningEvent]) -> bool:
        out.append(ContentDelta(self._buf))
        self._buf = ""
        return False


def _held(text: str, ends: tuple[str, ...]) -> int:
    """Where a possible start of one of `ends` begins at the tail of `text` (len(text) if none)."""
    start = len(text)
    for end in ends:
        for size in range(min(len(end) - 1, len(text)), 0, -1):
            if text.endswith(end[:size]):
                start = min(start, len(text) - size)
                break
    return start


class HarmonyFormat(ReasoningFormat):
    name = "harmony"
    start = CHANNEL + "analysis" + MESSAGE
    end = END
    forced_end = END + START + "assistant"

    def new_parser(self, phase: Phase) -> ReasoningParser:
        return HarmonyParser(phase)
