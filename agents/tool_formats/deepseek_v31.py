"""DeepSeek-V3.1: the calls in DeepSeek's special tokens, name then arguments around `<｜tool▁sep｜>`.

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}
    <｜tool▁call▁end｜><｜tool▁calls▁end｜>                                    (one line)

Parallel calls follow one another inside the section. The section, the reading and the rest are V3's
(deepseek_v3.py).
"""
from __future__ import annotations

import json
from typing import Any

from conch.agents.tool_formats.deepseek_v3 import (CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, SEP,
                                                  DeepSeekParser, DeepSeekV3Format)
from conch.agents.tool_formats.grammar import inline_json, literal
from conch.agents.tools import ToolFunction


class DeepSeekV31Parser(DeepSeekParser):
    """NAME<｜tool▁sep｜>{...}"""

    name = "deepseek_v31"

    def _call(self) -> bool:
        return self._name_until(SEP, lambda: self._json_arguments(self._call_end))


class DeepSeekV31Format(DeepSeekV3Format):
    name = "deepseek_v31"
    parser = DeepSeekV31Parser
    INSTRUCTION = ("To call functions, answer with the calls and nothing else:\n" + CALLS_BEGIN + CALL_BEGIN
                   + "<function name>" + SEP + "<arguments object>" + CALL_END + CALLS_END)
    SEPARATOR = ""

    def write_call(self, name: str, arguments: Any) -> str:
        return f"{name}{SEP}{json.dumps(arguments, ensure_ascii=False)}"

    def function_rules(self, k: int, index: int, tool: ToolFunction) -> list[str]:
        return [f"fn_{k}: {literal(tool.name + SEP)} args_{k}", f"args_{k}: {inline_json(tool.schema)}"]
