"""OpenAI harmony (gpt-oss): a call is a message on the commentary channel addressed to the function.

    <|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>

The recipient may also stand before the channel (`<|start|>assistant to=functions.get_weather<|channel|>
commentary json<|message|>...`); the parser reads a message header (at most HEADER_LIMIT characters up to
`<|message|>`) that names a `to=functions.<name>` recipient, then a JSON object, then `<|call|>` (missing at
the end of the text: it is a stop token, never decoded). Parallel calls are successive messages, each opened
by `<|start|>assistant`. A header without a recipient (the final answer, a preamble) is content, markup
included: the harmony reasoning format (agents/reasoning/harmony.py) unwraps those before this parser reads.

The grammar spells the tokens as text; the gpt-oss tokenizer decodes its special tokens to the same text. It
starts with an optional `<|start|>assistant` (the model opens a new message after its analysis ends).
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from conch.agents.tool_choice import ToolChoice
from conch.agents.tool_formats.base import ToolFormat
from conch.agents.tool_formats.grammar import inline_json, literal
from conch.agents.tool_formats.reading.markup import MarkupParser
from conch.agents.tools import ToolFunction
from conch.grammars import Grammar

START, CHANNEL, MESSAGE, CALL, END = "<|start|>", "<|channel|>", "<|message|>", "<|call|>", "<|end|>"
HEADER_LIMIT = 256
_RECIPIENT = re.compile(r"to=functions\.([A-Za-z0-9_.\-]+)")
_NOT_IN_HEADER = (START, END, CALL, "<|return|>")


class HarmonyParser(MarkupParser):
    name = "harmony"
    MARKERS = (START, CHANNEL)

    def _on_marker(self, marker: str) -> None:
        self._state = self._header

    def _header(self) -> bool:
        """Up to `<|message|>`: a header naming a function recipient, else not a call."""
        window = self._buf[self._pos:self._pos + HEADER_LIMIT + len(MESSAGE)]
        at = window.find(MESSAGE)
        if at < 0:
            return self._fail(self._pos) if len(window) == HEADER_LIMIT + len(MESSAGE) else self._wait_or_fail()
        header = window[:at]
        recipient = _RECIPIENT.search(header)
        if recipient is None or any(mark in header for mark in _NOT_IN_HEADER):
            return self._fail(self._pos + at + len(MESSAGE))
        self._new_sink().set_name(recipient.group(1))
        self._pos += at + len(MESSAGE)
        return self._json_arguments(self._call_end)

    def _call_end(self) -> bool:
        return self._branch(((CALL, self._called), (END, self._called)), at_end=self._called)

    def _called(self) -> bool:
        self._complete()
        return self._end_region()


class HarmonyFormat(ToolFormat):
    name = "harmony"
    parser = HarmonyParser
    INSTRUCTION = ("To call a function, answer with a commentary message addressed to it and nothing else:\n"
                   "<|channel|>commentary to=functions.<function name> <|constrain|>json<|message|>"
                   "<arguments object><|call|>")
    CALL_OPEN, CALL_CLOSE, SEPARATOR = CHANNEL + "commentary to=functions.", CALL, START + "assistant"

    def write_call(self, name: str, arguments: Any) -> str:
        return f"{name} <|constrain|>json{MESSAGE}{json.dumps(arguments, ensure_ascii=False)}"

    def grammar(self, tools: Sequence[ToolFunction], choice: ToolChoice, max_calls: int) -> Grammar | None:
        grammar = super().grammar(tools, choice, max_calls)
        if grammar is None:
            return None
        return Grammar(grammar.lark.replace("start: ", f"start: {literal(START + 'assistant')}? ", 1))

    def function_rules(self, k: int, index: int, tool: ToolFunction) -> list[str]:
        return [f"fn_{k}: {literal(tool.name + ' <|constrain|>json' + MESSAGE)} args_{k}",
                f"args_{k}: {inline_json(tool.schema)}"]
