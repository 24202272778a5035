"""Kimi-K2: a section of calls in Moonshot's special tokens, each call's id naming the function.

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>
    {"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>                           (one line)

The id is `functions.<name>:<index>` (the parser also takes a bare `<name>:<index>` or `<name>`); the arguments
are a JSON object. The grammar spells the tokens as text; Kimi's tokenizer decodes its special tokens to the
same text, which is what the parser reads. A call is valid once `<|tool_call_end|>` is seen; the section's end
may be missing at the end of the text (the model stopped there). Text after the section is content.
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from conch.agents.tool_formats.base import ToolFormat
from conch.agents.tool_formats.grammar import inline_json, literal
from conch.agents.tool_formats.reading.markup import CallSectionParser
from conch.agents.tools import ToolFunction

SECTION_BEGIN, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL_BEGIN, ARGUMENT_BEGIN, CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
_CALL_ID = re.compile(r"(?:functions\.)?(.+?)(?::[0-9]+)?")


def name_of_id(call_id: str) -> str | None:
    match = _CALL_ID.fullmatch(call_id)
    return match.group(1) if match else None


class KimiK2Parser(CallSectionParser):
    name = "kimi_k2"
    MARKERS = (SECTION_BEGIN,)
    CALL_BEGIN, CALL_END, SECTION_END = CALL_BEGIN, CALL_END, SECTION_END

    def _call(self) -> bool:
        return self._name_until(ARGUMENT_BEGIN, lambda: self._json_arguments(self._call_end), name_of=name_of_id)


class KimiK2Format(ToolFormat):
    name = "kimi_k2"
    parser = KimiK2Parser
    INSTRUCTION = ("To call functions, answer with one section of calls and nothing else:\n" + SECTION_BEGIN
                   + CALL_BEGIN + "functions.<function name>:<call index>" + ARGUMENT_BEGIN + "<arguments object>"
                   + CALL_END + SECTION_END)
    LIST_OPEN, LIST_CLOSE, SEPARATOR = SECTION_BEGIN, SECTION_END, ""
    CALL_OPEN, CALL_CLOSE = CALL_BEGIN, CALL_END

    def write_calls(self, calls: Sequence[tuple[str, Any]]) -> str:
        written = (CALL_BEGIN + f"functions.{n}:{i}" + ARGUMENT_BEGIN + json.dumps(a, ensure_ascii=False) + CALL_END
                   for i, (n, a) in enumerate(calls))
        return SECTION_BEGIN + "".join(written) + SECTION_END

    def write_call(self, name: str, arguments: Any) -> str:
        return f"functions.{name}:0" + ARGUMENT_BEGIN + json.dumps(arguments, ensure_ascii=False)

    def function_rules(self, k: int, index: int, tool: ToolFunction) -> list[str]:
        head = literal(f"functions.{tool.name}:")
        return [f"fn_{k}: {head} /[0-9]{{1,2}}/ {literal(ARGUMENT_BEGIN)} args_{k}",
                f"args_{k}: {inline_json(tool.schema)}"]
