"""Qwen3-Coder: XML calls, one `<tool_call>` block each, a parameter per tag with its value as bare text.

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    <parameter=days>
    3
    </parameter>
    </function>
    </tool_call>

Strings are written as they are, other values as JSON (as Qwen3-Coder's chat template writes them); the parser
reads each value's type from the offered tool's schema (raw_values.py). The newline after `<parameter=..>` and
the one before `</parameter>` belong to the markup. A call is valid once `</function>` is seen; the
`</tool_call>` after it may be missing at the end of the text. A block that breaks is content, tags included.
"""
from __future__ import annotations

from conch.agents.tool_formats.xml_call import CLOSE_TAG, XmlCallFormat, XmlCallParser

FUNCTION_OPEN, FUNCTION_CLOSE = "<function=", "</function>"
PARAMETER_OPEN, PARAMETER_CLOSE = "<parameter=", "</parameter>"


class Qwen3CoderParser(XmlCallParser):
    name = "qwen3_coder"

    def _open(self) -> bool:
        return self._expect(FUNCTION_OPEN, lambda: self._name_until(">", self._next))

    def _next(self) -> bool:
        return self._branch(((PARAMETER_OPEN, self._key_state), (FUNCTION_CLOSE, self._after_function)))

    def _key_state(self) -> bool:
        return self._read_key(">", lambda: self._read_value(PARAMETER_CLOSE, self._next, strip_newlines=True))

    def _after_function(self) -> bool:
        return self._branch(((CLOSE_TAG, self._close),), at_end=self._close)


class Qwen3CoderFormat(XmlCallFormat):
    name = "qwen3_coder"
    parser = Qwen3CoderParser
    INSTRUCTION = ("To call functions, answer with one block per call and nothing else:\n<tool_call>\n"
                   "<function=<function name>>\n<parameter=<parameter name>>\n<value>\n</parameter>\n</function>\n"
                   "</tool_call>")
    CALL_OPEN = "<tool_call>\n"
    NAME_OPEN, NAME_CLOSE = FUNCTION_OPEN, ">\n"
    KEY_OPEN, KEY_CLOSE, VALUE_CLOSE = PARAMETER_OPEN, ">\n", "\n" + PARAMETER_CLOSE + "\n"
    BODY_CLOSE = FUNCTION_CLOSE
