"""Tool-call parsers, found by name (a model's `tool_call_parser` config). Each is imported only when asked
for: the registry maps a name to "module:Class", never an elif chain.

    parser = get_parser("hermes")()          # one instance per stream
    events = parser.feed(delta) ... parser.finish()
    parsed = parser.parse(whole_text)
"""
from __future__ import annotations

import importlib

from agents.tools.parsers.base import ToolParser

DEFAULT_PARSER = "hermes"  # the format Conch's default tool prompt asks models to write

_REGISTRY: dict[str, str] = {
    "hermes": "agents.tools.parsers.hermes:HermesParser",
    "llama3": "agents.tools.parsers.llama3:Llama3Parser",
    "mistral": "agents.tools.parsers.mistral:MistralParser",
    "pythonic": "agents.tools.parsers.pythonic:PythonicParser",
}


class UnknownToolParser(ValueError):
    """A config names a parser that is not registered."""


def parser_names() -> list[str]:
    return sorted(_REGISTRY)


def get_parser(name: str) -> type[ToolParser]:
    try:
        module_name, class_name = _REGISTRY[name].split(":")
    except KeyError:
        raise UnknownToolParser(f"unknown tool_call_parser {name!r}; known: {', '.join(parser_names())}") from None
    return getattr(importlib.import_module(module_name), class_name)


__all__ = ["DEFAULT_PARSER", "ToolParser", "UnknownToolParser", "get_parser", "parser_names"]
