"""Whether a Lark grammar's `start` rule matches some finite string (`start: x` / `x: "a" x` matches none).

A rule is *productive* when one of its alternatives is a sequence of productive items: a terminal (a string, a
regex, a special token, an imported or undefined name), an optional / starred / `~ 0` item, or a productive rule.
The productive rules are a least fixpoint over the rules' expression trees. The reader is conservative: text
it does not understand (templates, directives inside expressions) gives no answer, never a refusal.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import GrammarError

_TOKEN = re.compile(r"""
    (?P<ws>\s+|//[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"i?)
  | (?P<regex>/(?:[^/\\\n]|\\.)+/[imslux]*)
  | (?P<special><\|[^|\n]*\|>|<\[[^\]\n]*\]>)
  | (?P<rule>^[?!]?[A-Za-z_][A-Za-z0-9_]*(?:\.-?\d+)?[ \t]*:)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<range>\d+(?:\.\.\d+)?)
  | (?P<directive>^%[^\n]*)
  | (?P<arrow>->[ \t]*[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>[|()\[\]?*+~])
""", re.VERBOSE | re.MULTILINE)


class _Unreadable(Exception):
    pass


def _rules(text: str) -> dict[str, list[tuple[str, str]]]:
    """Rule (and terminal) name -> its body's tokens (kind, text)."""
    rules: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _Unreadable(text[pos:pos + 20])
        pos, kind = m.end(), m.lastgroup or ""
        if kind in ("ws", "arrow"):
            continue
        if kind == "directive":
            current = None
            continue
        if kind == "rule":
            name = re.match(r"[?!]?([A-Za-z_][A-Za-z0-9_]*)", m.group()).group(1)  # type: ignore[union-attr]
            current = rules.setdefault(name, [])
            if current:
                current.append(("op", "|"))
            continue
        if current is None:
            raise _Unreadable(m.group())
        current.append((kind, m.group()))
    return rules


def _alternatives(tokens: list[tuple[str, str]], pos: int, close: str | None) -> tuple[list[list[Any]], int]:
    """An expression's alternatives, each a list of items (a token, or ("group", alternatives, optional))."""
    alternatives: list[list[Any]] = [[]]
    while pos < len(tokens):
        kind, text = tokens[pos]
        if kind == "op" and text == close:
            return alternatives, pos + 1
        if kind == "op" and text == "|":
            alternatives.append([])
            pos += 1
        elif kind == "op" and text in "([":
            inner, pos = _alternatives(tokens, pos + 1, ")" if text == "(" else "]")
            alternatives[-1].append(("group", inner, text == "["))
        elif kind == "op" and text in "?*" and alternatives[-1]:
            alternatives[-1][-1] = ("group", [[], [alternatives[-1][-1]]], True)
            pos += 1
        elif kind == "op" and text == "+" and alternatives[-1]:
            pos += 1
        elif kind == "op" and text == "~" and alternatives[-1] and pos + 1 < len(tokens):
            if tokens[pos + 1][1].split("..")[0] == "0":
                alternatives[-1][-1] = ("group", [[]], True)
            pos += 2
        elif kind in ("string", "regex", "special", "name"):
            alternatives[-1].append((kind, text))
            pos += 1
        else:
            raise _Unreadable(text)
    if close is not None:
        raise _Unreadable(f"unclosed {close}")
    return alternatives, pos


def _productive(item: Any, done: set[str], rules: dict[str, Any]) -> bool:
    if item[0] == "group":
        return item[2] or any(all(_productive(i, done, rules) for i in alt) for alt in item[1])
    return item[0] != "name" or item[1] not in rules or item[1] in done


def check_finite(text: str) -> None:
    """GrammarError if the grammar's `start` rule matches no finite string; nothing if it does, or if the
    text is beyond this reader."""
    try:
        rules = {name: _alternatives(tokens, 0, None)[0] for name, tokens in _rules(text).items()}
    except _Unreadable:
        return
    if "start" not in rules:
        return
    done: set[str] = set()
    grew = True
    while grew:
        new = {name for name, alts in rules.items() if name not in done
               and any(all(_productive(i, done, rules) for i in alt) for alt in alts)}
        done |= new
        grew = bool(new)
    if "start" not in done:
        stuck = sorted(set(rules) - done)
        raise GrammarError(f"the grammar matches no finite string: rule(s) {stuck} can never end (each "
                           "alternative needs a rule that needs itself again, as in 'start: x' / 'x: \"a\" x')")
