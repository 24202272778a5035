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
from conch.agents.tool_formats.reading.content import skip_whitespace
from conch.agents.tool_formats.reading.parser import ToolParser
from conch.agents.tool_formats.reading.python_call import CallScanner, literal_call
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
        self._pos = self._scanner.feed(self._buf, self._pos, self._final)
        if self._scanner.failed:
            return self._fail(self._pos)
        if not self._scanner.done:
            return self._fail(len(self._buf)) if self._final else False
        call = literal_call(self._scanner.text)
        if call is None:
            return self._fail(self._pos)
        sink = self._new_sink()
        sink.set_name(call[0])
        sink.add_arguments(call[1])
        self._complete(region_open=True)
        self._state = self._after_element
        return True

    def _after_element(self) -> bool:
        return self._list_separator(self._element)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Top-level keywords a keyword call can honour: the rest (anyOf, minProperties, ...) constrain the object as a
# whole, which the per-keyword grammar cannot.
_PLAIN_OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties", "unevaluatedProperties",
                                "$defs", "definitions", "$schema", "$id", "$comment", "title", "description",
                                "examples", "default"})


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
        keywords = _keywords(tool.schema, index)
        rules = [f"val_{k}_{j}: {inline_json(schema)}" for j, (_, schema, _) in enumerate(keywords)]
        first = _Keywords(k, keywords, rules).sequence(0, first=True)
        call = literal(tool.name + "(") + (f" {first}" if first else "") + ' ")"'
        return [f"fn_{k}: {call}", *rules]


class _Keywords:
    """The rules for keywords j.. of function k: `kw_{k}_{j}a` when none was written yet, `kw_{k}_{j}b` after
    one (its text starts with ", "). Every rule matches at least one keyword; `sequence` returns a reference,
    with `?` where the rest may be empty, or "" where nothing is left."""

    def __init__(self, k: int, keywords: list[tuple[str, dict, bool]], rules: list[str]) -> None:
        self.k, self.keywords, self.rules = k, keywords, rules
        self._made: set[str] = set()

    def sequence(self, j: int, *, first: bool) -> str:
        if j == len(self.keywords):
            return ""
        name = f"kw_{self.k}_{j}{'a' if first else 'b'}"
        if name not in self._made:
            self._made.add(name)
            key, _, required = self.keywords[j]
            take = f"{literal(('' if first else ', ') + key + '=')} val_{self.k}_{j}"
            rest = self.sequence(j + 1, first=False)
            alternatives = [f"{take} {rest}".strip()]
            skip = "" if required else self.sequence(j + 1, first=first).rstrip("?")
            if skip:
                alternatives.append(skip)
            self.rules.append(f"{name}: {' | '.join(alternatives)}")
        nullable = all(not required for _, _, required in self.keywords[j:])
        return name + ("?" if nullable else "")


def _keywords(schema: dict, index: int) -> list[tuple[str, dict, bool]]:
    """(name, value schema, required) per property, in the schema's order."""
    param = f"tools.{index}.function.parameters"
    extra = sorted(set(schema) - _PLAIN_OBJECT_KEYS)
    if extra or schema.get("type", "object") != "object":
        raise ToolFormatError(f"tools[{index}].function.parameters: the model's pythonic tool format writes keyword "
                              f"arguments, so the schema must be a plain object (unsupported here: "
                              f"{extra or 'type ' + json.dumps(schema['type'])})", param)
    properties, required = schema.get("properties", {}), set(schema.get("required", []))
    missing = sorted(required - set(properties))
    bad = [name for name in properties if not _is_identifier(name)]
    if missing or bad:
        raise ToolFormatError(f"tools[{index}].function.parameters: the model's pythonic tool format needs every "
                              f"required property declared and every property a Python identifier "
                              f"({missing + bad})", param)
    defs = {key: schema[key] for key in ("$defs", "definitions") if key in schema}  # for $refs inside values
    out = []
    for name, value in properties.items():
        if value is False:
            if name in required:
                raise ToolFormatError(f"tools[{index}].function.parameters: required property '{name}' allows "
                                      "no value, so the model's pythonic tool format cannot write a call", param)
            continue
        out.append((name, {**defs, **(value if isinstance(value, dict) else {})}, name in required))
    return out


def _is_identifier(name: str) -> bool:
    return bool(_IDENTIFIER.fullmatch(name)) and not keyword.iskeyword(name)
