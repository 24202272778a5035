"""A call written one argument at a time (pythonic's `f(a=1, b=2)`, Qwen3-Coder's `<parameter=a>`, GLM's
`<arg_key>a</arg_key>`): the tool's parameters as keywords, and the Lark rules that write them in the schema's
property order, every required one present, optional ones free to be left out.

Only what such a call can say is offered: the schema must be a plain object (top-level keywords other than
those describing properties constrain the object as a whole, which per-keyword rules cannot), and each format
names what a parameter name must be. Otherwise ToolFormatError, a 400 on a forced choice.
"""
from __future__ import annotations

import json
from collections.abc import Callable

from conch.agents.tool_formats.base import ToolFormatError

Keyword = tuple[str, dict, bool]     # (name, value schema with the $defs it may refer to, required)
Spell = Callable[[str, bool], str]   # (key, first) -> the Lark text written before the key's value

_PLAIN_OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties", "unevaluatedProperties",
                                "$defs", "definitions", "$schema", "$id", "$comment", "title", "description",
                                "examples", "default"})


def keyword_parameters(schema: dict, index: int, fmt: str, name_rule: str,
                       name_ok: Callable[[str], bool]) -> list[Keyword]:
    """(name, value schema, required) per property, in the schema's order. `fmt` and `name_rule` word the
    errors ("pythonic", "a Python identifier")."""
    param = f"tools.{index}.function.parameters"
    extra = sorted(set(schema) - _PLAIN_OBJECT_KEYS)
    if extra or schema.get("type", "object") != "object":
        raise ToolFormatError(f"tools[{index}].function.parameters: the model's {fmt} tool format writes keyword "
                              f"arguments, so the schema must be a plain object (unsupported here: "
                              f"{extra or 'type ' + json.dumps(schema['type'])})", param)
    properties, required = schema.get("properties", {}), set(schema.get("required", []))
    missing = sorted(required - set(properties))
    bad = [name for name in properties if not name_ok(name)]
    if missing or bad:
        raise ToolFormatError(f"tools[{index}].function.parameters: the model's {fmt} tool format needs every "
                              f"required property declared and every property {name_rule} ({missing + bad})", param)
    defs = {key: schema[key] for key in ("$defs", "definitions") if key in schema}  # for $refs inside values
    out = []
    for name, value in properties.items():
        if value is False:
            if name in required:
                raise ToolFormatError(f"tools[{index}].function.parameters: required property '{name}' allows "
                                      f"no value, so the model's {fmt} tool format cannot write a call", param)
            continue
        out.append((name, {**defs, **(value if isinstance(value, dict) else {})}, name in required))
    return out


class KeywordRules:
    """The rules for keywords j.. of function k: `kw_{k}_{j}a` when none was written yet, `kw_{k}_{j}b` after
    one. `spell(key, first)` is the Lark text before value rule `val_{k}_{j}` (the separator included when not
    first); `after` the Lark text after it, if any. Every rule matches at least one keyword; `sequence` returns a
    reference, with `?` where the rest may be empty, or "" where nothing is left."""

    def __init__(self, k: int, keywords: list[Keyword], rules: list[str], spell: Spell, after: str = "") -> None:
        self.k, self.keywords, self.rules, self.spell, self.after = k, keywords, rules, spell, after
        self._made: set[str] = set()

    def sequence(self, j: int, *, first: bool) -> str:
        if j == len(self.keywords):
            return ""
        name = f"kw_{self.k}_{j}{'a' if first else 'b'}"
        if name not in self._made:
            self._made.add(name)
            key, _, required = self.keywords[j]
            take = f"{self.spell(key, first)} val_{self.k}_{j} {self.after}".strip()
            rest = self.sequence(j + 1, first=False)
            alternatives = [f"{take} {rest}".strip()]
            skip = "" if required else self.sequence(j + 1, first=first).rstrip("?")
            if skip:
                alternatives.append(skip)
            self.rules.append(f"{name}: {' | '.join(alternatives)}")
        nullable = all(not required for _, _, required in self.keywords[j:])
        return name + ("?" if nullable else "")
