"""tool_choice as a grammar, so that calls always parse and arguments always match their schema.

    none      -> no tool grammar (the tools are not even rendered)
    auto      -> no grammar: the model may answer in prose or call; calls are parsed afterwards
    required  -> one or more calls (one if parallel_tool_calls is false), of any listed tool
    named     -> exactly one call of that function

The grammar writes calls in the hermes form that Conch's default tool prompt asks for, with the arguments
constrained by llguidance's inline `%json{...}` schemas.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from agents.tools import ToolFunction
from grammars import Grammar


# Arguments are written on one line with fixed separators: a small model cannot wander into endless
# whitespace, and the text is already in the parsers' canonical spacing apart from the separators.
_LAYOUT = {"whitespace_flexible": False, "key_separator": ": ", "item_separator": ", "}


def _compact(schema: dict) -> str:
    return json.dumps({"x-guidance": _LAYOUT, **schema}, ensure_ascii=False)


@dataclass(frozen=True)
class ToolChoice:
    mode: str                    # "none" | "auto" | "required" | "function"
    function: str | None = None  # the named function, for mode "function"


def tool_call_grammar(tools: Sequence[ToolFunction], choice: ToolChoice, parallel: bool = True) -> Grammar | None:
    if choice.mode in ("none", "auto"):
        return None
    chosen = [t for t in tools if choice.mode == "required" or t.name == choice.function]
    alternatives = " | ".join(f"fn_{i}" for i in range(len(chosen)))
    rules = [
        'start: call' + (' ("\\n" call)*' if parallel and choice.mode == "required" else ""),
        f'call: "<tool_call>\\n" ({alternatives}) "\\n</tool_call>"',
    ]
    for i, tool in enumerate(chosen):
        head = json.dumps('{"name": ' + json.dumps(tool.name) + ', "arguments": ')
        rules.append(f'fn_{i}: {head} args_{i} "}}"')
        rules.append(f"args_{i}: %json{_compact(tool.schema)}")
    return Grammar("\n".join(rules))
