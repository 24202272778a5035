"""GLM-4.5 / GLM-4.6: one `<tool_call>` block per call, the name on its first line, then key/value tag pairs.

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    <arg_key>days</arg_key>
    <arg_value>3</arg_value>
    </tool_call>

Strings are written as they are, other values as JSON (as GLM's chat template writes them); the parser reads
each value's type from the offered tool's schema (raw_values.py). A call is valid once `</tool_call>` is
seen, or at the end of the text after a whole pair. A block that breaks is content, tags included.
"""
from __future__ import annotations

from conch.agents.tool_formats.xml_call import CLOSE_TAG, XmlCallFormat, XmlCallParser

KEY_OPEN, KEY_CLOSE = "<arg_key>", "</arg_key>"
VALUE_OPEN, VALUE_CLOSE = "<arg_value>", "</arg_value>"


class Glm45Parser(XmlCallParser):
    name = "glm45"

    def _open(self) -> bool:
        return self._name_before(((KEY_OPEN, self._key_state), (CLOSE_TAG, self._close)))

    def _key_state(self) -> bool:
        return self._read_key(KEY_CLOSE, lambda: self._expect(VALUE_OPEN, self._value_state))

    def _value_state(self) -> bool:
        return self._read_value(VALUE_CLOSE, self._next)

    def _next(self) -> bool:
        return self._branch(((KEY_OPEN, self._key_state), (CLOSE_TAG, self._close)), at_end=self._close)


class Glm45Format(XmlCallFormat):
    name = "glm45"
    parser = Glm45Parser
    INSTRUCTION = ("To call functions, answer with one block per call and nothing else:\n<tool_call><function name>\n"
                   "<arg_key><parameter name></arg_key>\n<arg_value><value></arg_value>\n</tool_call>")
    CALL_CLOSE = CLOSE_TAG
    NAME_OPEN, NAME_CLOSE = "", "\n"
    KEY_OPEN, KEY_CLOSE, VALUE_CLOSE = "<arg_key>", "</arg_key>\n<arg_value>", "</arg_value>\n"
