"""tool_choice as a grammar, so that calls always parse and arguments always match their schema.

    none      -> no tool grammar (the tools are not even rendered)
    auto      -> no grammar: the model may answer in prose or call; calls are parsed afterwards
    required  -> one to `max_calls` calls of any listed tool
    named     -> exactly one call of that function

The grammar writes calls in the hermes form that Conch's default tool prompt asks for (so the text of a
forced choice is always read by GRAMMAR_PARSER, whatever parser the model's config names), with the
arguments constrained by llguidance's inline `%json{...}` schemas. EOS is allowed after each complete call
(the grammar accepts there) and nowhere else.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from agents.tools import ToolFunction
from engine.types import RequestStatus
from grammars import Grammar

GRAMMAR_PARSER = "hermes"          # the tool_call_parser that reads what these grammars write
DEFAULT_MAX_PARALLEL_TOOL_CALLS = 4

# Arguments are written on one line with fixed separators: a small model cannot wander into endless
# whitespace, and the text is already in the parsers' canonical spacing apart from the separators.
_LAYOUT = {"whitespace_flexible": False, "key_separator": ": ", "item_separator": ", "}


def _compact(schema: dict) -> str:
    return json.dumps({"x-guidance": _LAYOUT, **schema}, ensure_ascii=False)


@dataclass(frozen=True)
class ToolChoice:
    mode: str                    # "none" | "auto" | "required" | "function"
    function: str | None = None  # the named function, for mode "function"

    @property
    def forced(self) -> bool:
        """The output is calls only, enforced by a grammar."""
        return self.mode in ("required", "function")

    def final_status(self, status: RequestStatus, has_calls: bool) -> RequestStatus:
        """OpenAI's rule: FINISHED_TOOL_CALLS ("tool_calls") when the model chose to call (auto, required); a
        named choice is the caller's decision, so it stays FINISHED_STOPPED ("stop"). Other ends pass through;
        RequestStatus.finish_reason is the one map to OpenAI's words."""
        if status == RequestStatus.FINISHED_STOPPED and has_calls and self.mode != "function":
            return RequestStatus.FINISHED_TOOL_CALLS
        return status


def _calls_rule(count: int) -> str:
    """1..count calls separated by newlines: `call ("\\n" call ("\\n" call)?)?` for count 3."""
    rule = ""
    for _ in range(count - 1):
        rule = f' ("\\n" call{rule})?'
    return "call" + rule


def tool_call_grammar(tools: Sequence[ToolFunction], choice: ToolChoice,
                      max_calls: int = DEFAULT_MAX_PARALLEL_TOOL_CALLS) -> Grammar | None:
    """`max_calls` (>= 1) bounds a required choice; a named one is always a single call."""
    if not choice.forced:
        return None
    chosen = [t for t in tools if choice.mode == "required" or t.name == choice.function]
    alternatives = " | ".join(f"fn_{i}" for i in range(len(chosen)))
    rules = [
        "start: " + _calls_rule(max_calls if choice.mode == "required" else 1),
        f'call: "<tool_call>\\n" ({alternatives}) "\\n</tool_call>"',
    ]
    for i, tool in enumerate(chosen):
        head = json.dumps('{"name": ' + json.dumps(tool.name) + ', "arguments": ')
        rules.append(f'fn_{i}: {head} args_{i} "}}"')
        rules.append(f"args_{i}: %json{_compact(tool.schema)}")
    return Grammar("\n".join(rules))
