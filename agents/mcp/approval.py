"""`require_approval`: which of a server's tools need the client's approval before Conch calls them.

    "always" (OpenAI's default) | "never" | {"never": {"tool_names": [...]}} | {"always": {"tool_names": [...]}}
A tool named under "always" waits for approval, one under "never" runs at once; a tool in neither list needs
approval unless the rule gave only an "always" list (then the list is the exception, as OpenAI reads it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ApprovalRule:
    default_needs: bool = True                 # a tool no list names
    never: frozenset[str] = frozenset()        # run without asking
    always: frozenset[str] = frozenset()       # always ask (wins over `never`)

    def needs(self, tool: str) -> bool:
        if tool in self.always:
            return True
        return False if tool in self.never else self.default_needs

    @classmethod
    def parse(cls, value: Any) -> "ApprovalRule":
        """The wire value (None: OpenAI's default, "always"). ValueError naming what is wrong."""
        if value is None or value == "always":
            return cls(True)
        if value == "never":
            return cls(False)
        if not isinstance(value, dict) or not value or set(value) - {"always", "never"}:
            raise ValueError('require_approval must be "always", "never" or {"always"|"never": {"tool_names": '
                             '[...]}}')
        lists = {k: _tool_names(k, v) for k, v in value.items()}
        only_always = "always" in lists and "never" not in lists     # then the rest run unapproved
        return cls(not only_always, lists.get("never", frozenset()),
                   lists.get("always", frozenset()))


def _tool_names(key: str, value: Any) -> frozenset[str]:
    if not isinstance(value, dict) or set(value) - {"tool_names", "read_only"}:
        raise ValueError(f'require_approval.{key} must be {{"tool_names": [...]}}')
    names = value.get("tool_names", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"require_approval.{key}.tool_names must be a list of tool names")
    return frozenset(names)
