"""Pythonic calls (Llama 3.2 / Llama 4): a Python list of keyword calls whose values are literals.

    [get_weather(city="Paris", days=3), get_time(timezone="Europe/Paris")]

Under a grammar each keyword's value is a JSON value valid under that property's schema (`true`, `false`
and `null` are read as Python's), keywords in the schema's property order, every required one present,
optional ones free to be left out. So only what a keyword call can say is offered: the grammar refuses
(ToolFormatError, a 400) a function name that is not a dotted Python name, a parameter that is not a Python
identifier, and top-level schema keywords other than those describing plain properties.
"""
from __future__ import annotations

import json
import keyword
import re
from typing import Any

from agents.tool_formats.base import ToolFormat, ToolFormatError
from agents.tool_formats.grammar import inline_json, literal
from agents.tools import ToolFunction
from agents.tools.parsers.pythonic import PythonicParser

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
