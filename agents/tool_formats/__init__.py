"""Tool-call formats, found by name (a model's `tool_call_parser` config): the one registry. Each
`<name>.py` owns the prompt, the grammar of a forced `tool_choice` and the parser, so the three always agree;
what the parsers share reads under `reading/`. Imported only when asked for: the registry maps a name to
"module:Class", never an elif chain. Importing this package makes a config naming an unknown format fail to
load (engine/repository/config.py's config checks), rather than each request.

    fmt = get_format("llama3")
    messages = fmt.prompt(messages, tools)          # for a chat template that knows no tools
    grammar = fmt.grammar(tools, choice, max_calls)  # None unless the choice is required or named
    parser = fmt.new_parser(eager=choice.forced)     # one per stream
"""
from __future__ import annotations

import functools
import importlib

from conch.agents.tool_formats.base import ToolFormat, ToolFormatError
from conch.agents.tool_formats.reading.parser import ToolParser
from conch.engine.repository.config import ModelConfig, add_config_check

DEFAULT_FORMAT = "hermes"

_REGISTRY: dict[str, str] = {
    "deepseek_v3": "conch.agents.tool_formats.deepseek_v3:DeepSeekV3Format",
    "deepseek_v31": "conch.agents.tool_formats.deepseek_v31:DeepSeekV31Format",
    "gemma3": "conch.agents.tool_formats.gemma3:Gemma3Format",
    "glm45": "conch.agents.tool_formats.glm45:Glm45Format",
    "granite": "conch.agents.tool_formats.granite:GraniteFormat",
    "harmony": "conch.agents.tool_formats.harmony:HarmonyFormat",
    "hermes": "conch.agents.tool_formats.hermes:HermesFormat",
    "kimi_k2": "conch.agents.tool_formats.kimi_k2:KimiK2Format",
    "llama3": "conch.agents.tool_formats.llama3:Llama3Format",
    "mistral": "conch.agents.tool_formats.mistral:MistralFormat",
    "pythonic": "conch.agents.tool_formats.pythonic:PythonicFormat",
    "qwen3_coder": "conch.agents.tool_formats.qwen3_coder:Qwen3CoderFormat",
}


class UnknownToolFormat(ValueError):
    """A config names a format that is not registered."""


def format_names() -> list[str]:
    return sorted(_REGISTRY)


@functools.cache
def get_format(name: str) -> ToolFormat:
    """The format's one (stateless) instance."""
    try:
        module_name, class_name = _REGISTRY[name].split(":")
    except KeyError:
        raise UnknownToolFormat(f"unknown tool_call_parser {name!r}; known: {', '.join(format_names())}") from None
    return getattr(importlib.import_module(module_name), class_name)()


def _check_config(config: ModelConfig) -> str | None:
    """What is wrong with a model config's `tool_call_parser`, or None."""
    if config.tool_call_parser in _REGISTRY:
        return None
    return f"unknown tool_call_parser {config.tool_call_parser!r}; known: {', '.join(format_names())}"


add_config_check(_check_config)

__all__ = ["DEFAULT_FORMAT", "ToolFormat", "ToolFormatError", "ToolParser", "UnknownToolFormat", "format_names",
           "get_format"]
