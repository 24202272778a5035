"""Mistral's array form: `[TOOL_CALLS]` and a JSON list of call objects.

    [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": ..., "arguments": ...}]

The grammar spells `[TOOL_CALLS]` as text; a Mistral tokenizer's special token of that name decodes to the
same text, which is what the parser reads.
"""
from __future__ import annotations

from agents.tool_formats.json_call import JsonCallFormat
from agents.tools.parsers.mistral import TOOL_CALLS, MistralParser


class MistralFormat(JsonCallFormat):
    name = "mistral"
    parser = MistralParser
    INSTRUCTION = ("To call functions, answer with [TOOL_CALLS] and a JSON list of the calls, and nothing else:\n"
                   '[TOOL_CALLS][{"name": <function name>, "arguments": <arguments object>}]')
    LIST_OPEN = TOOL_CALLS + "["
    LIST_CLOSE = "]"
    SEPARATOR = ", "
