"""Pythonic calls (Llama 3.2 / Llama 4): a Python list of keyword calls whose values are literals.

    [get_weather(city="Paris", days=3), get_time(timezone="Europe/Paris")]

Under a grammar each keyword's value is a JSON value valid under that property's schema (`true`, `false`
and `null` are read as Python's), keywords in the schema's property order, every required one present,
optional ones free to be left out. So only what a keyword call can say is offered: the grammar refuses
(ToolFormatError, a 400) a function name that is not a dotted Python name, a parameter that is not a Python
identifier, and top-level schema keywords other than those describing plain properties.

The parser: the message opens with a Python list of calls,

    [get_weather(city="Paris", unit="celsius"), get_time(tz="Europe/Paris")]

Calls are recognized only where the message opens (after whitespace); text after the closing ']' is
content. Each element becomes a call as soon as its closing ')' is seen and `ast` accepts it as a literal
keyword call (see python_call.py); if an element breaks, the text from the end of the last good call is
content. Arguments are `json.dumps` of the literal values (canonical form), so they are sent once per call,
never streamed in pieces (`eager` changes nothing here). A missing ']' at the end of the text is forgiven.
"""
from __future__ import annotations

import json
import keyword
import re
from typing import Any

from conch.agents.tool_formats.base import ToolFormat, ToolFormatError
from conch.agents.tool_formats.grammar import inline_json, literal
from conch.agents.tool_formats.keywords import KeywordRules, keyword_parameters
from conch.agents.tool_formats.reading.content import skip_whitespace
from conch.agents.tool_formats.reading.parser import ToolParser
from conch.agents.tool_formats.reading.python_call import CallScanner
from conch.agents.tools import ToolFunction

class PythonicParser(ToolParser):
    name = "pythonic"
    MARKERS = ()
    _scanner: CallScanner

    def _start(self) -> bool:
        pos = skip_whitespace(self._buf, self._pos)
        if pos == len(self._buf) and not self._final:
            return False  # only whitespace so far: cannot tell yet
        if pos < len(self._buf) and self._buf[pos] == "[":
            self._seg, self._pos = pos, pos + 1  # leading whitespace borders a call: dropped
            self._state = self._element
        else:
            self._state = self._content
        return True

    def _element(self) -> bool:
        pos = skip_whitespace(self._buf, self._pos)
        if pos == len(self._buf):
            return self._fail(pos) if self._final else False
        if self._buf[pos] == "]" and self._calls:  # after a trailing comma: fine in Python
            self._pos = pos + 1
            return self._end_region()
        self._scanner, self._pos, self._state = CallScanner(), pos, self._read_element
        return True

    def _read_element(self) -> bool:
        return self._python_call(self._scanner, self._after_element)

    def _after_element(self) -> bool:
        return self._list_separator(self._element)


class PythonicFormat(ToolFormat):
    name = "pythonic"
    parser = PythonicParser
    INSTRUCTION = ("To call functions, answer with a Python list of calls with keyword arguments, and nothing "
                   "else:\n[<function name>(<argument name>=<value>, ...), ...]")
    LIST_OPEN = "["
    LIST_CLOSE = "]"
    SEPARATOR = ", "

    def write_call(self, name: str, arguments: Any) -> str:
        if not isinstance(arguments, dict):  # not JSON in the request: handed back as one string argument
            arguments = {"arguments": arguments}
        pairs = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
        return f"{name}({pairs})"

    def function_rules(self, k: int, index: int, tool: ToolFunction) -> list[str]:
        if not all(_is_identifier(part) for part in tool.name.split(".")):
            raise ToolFormatError(f"tools[{index}].function.name: the model's pythonic tool format needs a Python "
                                  f"name, not '{tool.name}'", f"tools.{index}.function.name")
        keywords = keyword_parameters(tool.schema, index, "pythonic", "a Python identifier", _is_identifier)
        rules = [f"val_{k}_{j}: {inline_json(schema)}" for j, (_, schema, _) in enumerate(keywords)]
        spell = lambda key, first: literal(("" if first else ", ") + key + "=")  # noqa: E731
        first = KeywordRules(k, keywords, rules, spell).sequence(0, first=True)
        call = literal(tool.name + "(") + (f" {first}" if first else "") + ' ")"'
        return [f"fn_{k}: {call}", *rules]


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _is_identifier(name: str) -> bool:
    return bool(_IDENTIFIER.fullmatch(name)) and not keyword.iskeyword(name)
