"""Regex syntax checks that need no library: Python's parser plus the constructs no library has.

Every library runs regexes as automata, so look-around, back-references, conditionals, atomic
groups and possessive repeats are refused here, with a message that names the construct.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from .errors import GrammarError

try:  # Python >= 3.11
    from re import _parser as _p  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _p

_UNSUPPORTED = {
    "ASSERT": "look-around",
    "ASSERT_NOT": "look-around",
    "GROUPREF": "a back-reference",
    "GROUPREF_EXISTS": "a conditional group",
    "ATOMIC_GROUP": "an atomic group",
    "POSSESSIVE_REPEAT": "a possessive repeat",
}
_SPACE_AND_CONTROL_CATEGORIES = {"CATEGORY_SPACE", "CATEGORY_UNI_SPACE", "CATEGORY_LINEBREAK"}


def check_regex(pattern: str, keyword: str | None = None) -> None:
    """Raise GrammarError unless `pattern` parses and uses only automaton-friendly constructs."""
    if not isinstance(pattern, str):
        raise GrammarError("a regex must be a string", keyword)
    try:
        tree = _p.parse(pattern)
    except re.error as exc:
        raise GrammarError(f"invalid regex {pattern!r}: {exc}", keyword) from None
    for op, _ in _walk(tree):
        if str(op) in _UNSUPPORTED:
            raise GrammarError(f"regex {pattern!r} uses {_UNSUPPORTED[str(op)]}, which is not supported", keyword)


def may_produce(pattern: str, chars: str) -> bool:
    """Conservatively, whether a string matching `pattern` may contain one of `chars`.

    Used where a library pastes a pattern into JSON text raw: a pattern that can yield `"`, `\\`
    or a control character would then break the JSON. `pattern` must already pass check_regex.
    """
    return any(_atom_may_produce(op, arg, chars) for op, arg in _walk(_p.parse(pattern)))


def _walk(tree: Any) -> Iterator[tuple[Any, Any]]:
    """Every (opcode, argument) in a parsed regex, depth first."""
    for op, arg in tree:
        yield op, arg
        for child in _children(op, arg):
            yield from _walk(child)


def _children(op: Any, arg: Any) -> list[Any]:
    name = str(op)
    if name == "BRANCH":
        return list(arg[1])
    if name == "SUBPATTERN":
        return [arg[-1]]
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        return [arg[2]]
    if name in ("ATOMIC_GROUP", "ASSERT", "ASSERT_NOT"):
        return [arg[-1]]
    return []


def _atom_may_produce(op: Any, arg: Any, chars: str) -> bool:
    name = str(op)
    if name == "LITERAL":
        return chr(arg) in chars
    if name in ("NOT_LITERAL", "ANY"):
        return True
    if name == "CATEGORY":
        return _category_may_produce(str(arg), chars)
    if name == "IN":
        return any(_class_item_may_produce(item_op, item_arg, chars) for item_op, item_arg in arg)
    return False  # groups, repeats and branches are walked into; anchors produce nothing


def _class_item_may_produce(op: Any, arg: Any, chars: str) -> bool:
    name = str(op)
    if name == "NEGATE":
        return True
    if name == "RANGE":
        return any(arg[0] <= ord(char) <= arg[1] for char in chars)
    return _atom_may_produce(op, arg, chars)


def _category_may_produce(category: str, chars: str) -> bool:
    if "NOT" in category:
        return True
    if category in _SPACE_AND_CONTROL_CATEGORIES:
        return any(char.isspace() for char in chars)
    return False  # \d and \w never yield quotes, backslashes or control characters
