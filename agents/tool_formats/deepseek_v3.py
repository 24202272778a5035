"""DeepSeek-V3 and R1: the calls in DeepSeek's special tokens, each a typed name and a fenced JSON block (V3.1's
form, name<｜tool▁sep｜>{...}, is deepseek_v31.py's).

              <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
              ```json
              {"city": "Paris"}
              ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

(the bars are U+FF5C, the spaces U+2581). Parallel calls follow one another inside the section (V3 puts a
newline between them). The grammar spells the tokens as text; DeepSeek's tokenizer decodes its special tokens
to the same text, which is what the parser reads. A call is valid once `<｜tool▁call▁end｜>` is seen; the
section's end may be missing at the end of the text. Text after the section is content.
"""
from __future__ import annotations

import json
from typing import Any, ClassVar

from conch.agents.tool_formats.base import ToolFormat
from conch.agents.tool_formats.grammar import inline_json, literal
from conch.agents.tool_formats.reading.markup import CallSectionParser
from conch.agents.tool_formats.reading.parser import State, ToolParser
from conch.agents.tools import ToolFunction

CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, SEP, CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"
JSON_OPEN, JSON_CLOSE = "```json\n", "\n```"


class DeepSeekParser(CallSectionParser):
    MARKERS = (CALLS_BEGIN,)
    CALL_BEGIN, CALL_END, SECTION_END = CALL_BEGIN, CALL_END, CALLS_END


class DeepSeekV3Parser(DeepSeekParser):
    """function<｜tool▁sep｜>NAME\\n```json\\n{...}\\n```"""

    name = "deepseek_v3"

    def _call(self) -> bool:
        return self._expect("function", lambda: self._expect(SEP, self._name, skip_ws=False))

    def _name(self) -> bool:
        arguments: State = lambda: self._json_arguments(lambda: self._expect("```", self._call_end))  # noqa: E731
        return self._name_until("```json", arguments)


class DeepSeekV3Format(ToolFormat):
    name = "deepseek_v3"
    parser: ClassVar[type[ToolParser]] = DeepSeekV3Parser
    INSTRUCTION = ("To call functions, answer with the calls and nothing else:\n" + CALLS_BEGIN + CALL_BEGIN
                   + "function" + SEP + "<function name>\n" + JSON_OPEN + "<arguments object>" + JSON_CLOSE
                   + CALL_END + CALLS_END)
    LIST_OPEN, LIST_CLOSE, SEPARATOR = CALLS_BEGIN, CALLS_END, "\n"
    CALL_OPEN, CALL_CLOSE = CALL_BEGIN, CALL_END

    def write_call(self, name: str, arguments: Any) -> str:
        return f"function{SEP}{name}\n{JSON_OPEN}{json.dumps(arguments, ensure_ascii=False)}{JSON_CLOSE}"

    def function_rules(self, k: int, index: int, tool: ToolFunction) -> list[str]:
        return [f"fn_{k}: {literal(f'function{SEP}{tool.name}{chr(10)}{JSON_OPEN}')} args_{k} {literal(JSON_CLOSE)}",
                f"args_{k}: {inline_json(tool.schema)}"]
