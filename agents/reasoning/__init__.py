"""Reasoning formats, found by name or by the chat template that writes them: the one registry.

    fmt = reasoning_for_template(tokenizer.chat_template)   # None: the model does not reason
    phase = fmt.start_phase(prompt)                        # where the reply starts
    parser = fmt.new_parser(phase)                         # one per choice: reasoning and content events

A model's config may name its format (`reasoning_parser`); otherwise the template's markup picks it (the
first row of `_DETECT` whose text the template holds).
"""
from __future__ import annotations

import functools
import importlib

from conch.agents.reasoning.base import Phase, ReasoningDelta, ReasoningEvent, ReasoningFormat, ReasoningParser

_REGISTRY: dict[str, str] = {
    "harmony": "conch.agents.reasoning.harmony:HarmonyFormat",
    "think": "conch.agents.reasoning.think:ThinkFormat",
}
_DETECT: tuple[tuple[str, str], ...] = (("<|channel|>", "harmony"), ("</think>", "think"))


class UnknownReasoningFormat(ValueError):
    """A name that is not registered."""


def reasoning_names() -> list[str]:
    return sorted(_REGISTRY)


@functools.cache
def get_reasoning(name: str) -> ReasoningFormat:
    try:
        module_name, class_name = _REGISTRY[name].split(":")
    except KeyError:
        raise UnknownReasoningFormat(f"unknown reasoning_parser {name!r}; known: "
                                     f"{', '.join(reasoning_names())}") from None
    return getattr(importlib.import_module(module_name), class_name)()


def reasoning_for_template(template: str | None) -> ReasoningFormat | None:
    """The format a chat template writes its reasoning in, or None (the model does not reason)."""
    if not template:
        return None
    for marker, name in _DETECT:
        if marker in template:
            return get_reasoning(name)
    return None


__all__ = ["Phase", "ReasoningDelta", "ReasoningEvent", "ReasoningFormat", "ReasoningParser",
           "UnknownReasoningFormat", "get_reasoning", "reasoning_for_template", "reasoning_names"]
