"""What the XML-style formats share (Qwen3-Coder, GLM-4.5): a call opened by `<tool_call>`, its arguments one
key/value pair at a time with values as bare text (raw_values.py), read back into a JSON object once the call
closes, and forced-call grammars that write each parameter in the schema's property order (keywords.py).

The arguments leave in one piece when the call is whole (their types come from the schema, known only per
value), so `eager` changes nothing here, as for pythonic.
"""
from __future__ import annotations

import re
from typing import Any, ClassVar

from conch.agents.tool_formats.base import ToolFormat
from conch.agents.tool_formats.grammar import literal
from conch.agents.tool_formats.keywords import KeywordRules, keyword_parameters
from conch.agents.tool_formats.raw_values import read_value, value_rule
from conch.agents.tool_formats.reading.markup import MarkupParser
from conch.agents.tools import ToolFunction
from conch.agents.tools.canonical import dumps

OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"
_KEY = re.compile(r"[^<>\n]+")


class XmlCallParser(MarkupParser):
    MARKERS = (OPEN_TAG,)
    _arguments: dict[str, Any]
    _key: str

    def _on_marker(self, marker: str) -> None:
        self._arguments = {}
        self._state = self._open

    def _open(self) -> bool:
        raise NotImplementedError

    def _read_key(self, end: str, then: Any) -> bool:
        key = self._text_until(end)
        if key is None:
            return self._wait_or_fail()
        if not _KEY.fullmatch(key.strip()):
            return self._fail(self._pos)
        self._key, self._state = key.strip(), then
        return True

    def _read_value(self, end: str, then: Any, *, strip_newlines: bool = False) -> bool:
        text = self._text_until(end)
        if text is None:
            return self._wait_or_fail()
        if strip_newlines:
            text = text.removeprefix("\n").removesuffix("\n")
        assert self._sink is not None and self._sink.name is not None
        schema = self._schema(self._sink.name).get("properties", {}).get(self._key, {})
        self._arguments[self._key] = read_value(text, schema if isinstance(schema, dict) else {})
        self._state = then
        return True

    def _close(self) -> bool:
        assert self._sink is not None
        self._sink.add_arguments(dumps(self._arguments))
        self._complete()
        return self._end_region()


class XmlCallFormat(ToolFormat):
    """Subclasses set the texts around the name and each parameter; the prompt writes what the grammar does."""

    CALL_OPEN, CALL_CLOSE, SEPARATOR = OPEN_TAG, "\n" + CLOSE_TAG, "\n"
    NAME_OPEN: ClassVar[str]
    NAME_CLOSE: ClassVar[str]
    KEY_OPEN: ClassVar[str]
    KEY_CLOSE: ClassVar[str]    # between key and value
    VALUE_CLOSE: ClassVar[str]  # after the value, before the next key or the end
    BODY_CLOSE: ClassVar[str] = ""

    def write_call(self, name: str, arguments: Any) -> str:
        if not isinstance(arguments, dict):  # not JSON in the request: handed back as one string argument
            arguments = {"arguments": arguments}
        pairs = "".join(self.KEY_OPEN + k + self.KEY_CLOSE + (v if isinstance(v, str) else dumps(v))
                        + self.VALUE_CLOSE for k, v in arguments.items())
        return self.NAME_OPEN + name + self.NAME_CLOSE + pairs + self.BODY_CLOSE

    def function_rules(self, k: int, index: int, tool: ToolFunction) -> list[str]:
        keywords = keyword_parameters(tool.schema, index, self.name, "a name without '<', '>' or a newline",
                                      lambda key: bool(_KEY.fullmatch(key)) and key == key.strip())
        param = f"tools.{index}.function.parameters.properties"
        rules = [f"val_{k}_{j}: {value_rule(schema, f'{param}.{key}')}" for j, (key, schema, _) in enumerate(keywords)]
        spell = lambda key, first: literal(self.KEY_OPEN + key + self.KEY_CLOSE)  # noqa: E731
        body = KeywordRules(k, keywords, rules, spell, literal(self.VALUE_CLOSE)).sequence(0, first=True)
        tail = f" {literal(self.BODY_CLOSE)}" if self.BODY_CLOSE else ""
        return [f"fn_{k}: {literal(self.NAME_OPEN + tool.name + self.NAME_CLOSE)} {body}{tail}".replace("  ", " "),
                *rules]
