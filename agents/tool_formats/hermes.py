"""Hermes / Qwen, and Conch's default: one `<tool_call>` block per call, a newline between blocks.

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>
"""
from __future__ import annotations

from agents.tool_formats.json_call import JsonCallFormat
from agents.tools.parsers.hermes import CLOSE_TAG, OPEN_TAG, HermesParser


class HermesFormat(JsonCallFormat):
    name = "hermes"
    parser = HermesParser
    INSTRUCTION = ("To call functions, answer with one block per call and nothing else:\n<tool_call>\n"
                   '{"name": <function name>, "arguments": <arguments object>}\n</tool_call>')
    CALL_OPEN = OPEN_TAG + "\n"
    CALL_CLOSE = "\n" + CLOSE_TAG
    SEPARATOR = "\n"
