"""IBM Granite 3.x: `<|tool_call|>` and a JSON list of call objects.

    <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "add", "arguments": {...}}]

The list reads as Mistral's array form does (mistral.py): each element a call once complete, a broken element
given back as content from the end of the last good call, a missing ']' at the end of the text forgiven. The
grammar spells `<|tool_call|>` as text; Granite's tokenizer decodes its special token to the same text.
"""
from __future__ import annotations

from conch.agents.tool_formats.json_call import JsonCallFormat
from conch.agents.tool_formats.mistral import MistralParser

TOOL_CALL = "<|tool_call|>"


class GraniteParser(MistralParser):
    name = "granite"
    MARKERS = (TOOL_CALL,)


class GraniteFormat(JsonCallFormat):
    name = "granite"
    parser = GraniteParser
    INSTRUCTION = ("To call functions, answer with <|tool_call|> and a JSON list of the calls, and nothing else:\n"
                   '<|tool_call|>[{"name": <function name>, "arguments": <arguments object>}]')
    LIST_OPEN = TOOL_CALL + "["
    LIST_CLOSE = "]"
    SEPARATOR = ", "
