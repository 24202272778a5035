"""A tool-call format: one object owns how tools are offered in the prompt, what a forced `tool_choice`
constrains the output to, and how the model's text is read back (whole or streamed). A model's config picks
one by name (`tool_call_parser`), so the grammar always writes what the parser reads.

Invariant (tested for every format): any text the format's grammar accepts, its parser reads back as exactly
the calls written, with the arguments the grammar constrained; and the calls the prompt writes back into
earlier assistant turns parse the same way.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from conch.agents.tool_choice import ToolChoice
from conch.agents.tool_formats.grammar import calls_rule, framed
from conch.agents.tool_formats.prompt import with_tool_prompt
from conch.agents.tool_formats.reading.parser import ToolParser
from conch.agents.tools import ToolFunction
from conch.grammars import Grammar


class ToolFormatError(ValueError):
    """The request offers a tool this format cannot write under a grammar; `param` names the field."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.message, self.param = message, param


class ToolFormat:
    """Subclasses set the class attributes and implement `write_call` and `function_rules`."""

    name: ClassVar[str]
    parser: ClassVar[type[ToolParser]]
    INSTRUCTION: ClassVar[str]         # how to call, after the tool listing in the default system prompt
    LIST_OPEN: ClassVar[str] = ""      # the grammar's text around all calls,
    LIST_CLOSE: ClassVar[str] = ""
    SEPARATOR: ClassVar[str] = "\n"    # between two calls,
    CALL_OPEN: ClassVar[str] = ""      # and around each call
    CALL_CLOSE: ClassVar[str] = ""

    def new_parser(self, *, eager: bool = False, tools: Sequence[ToolFunction] = ()) -> ToolParser:
        """One per stream; `eager` for forced choices (a call cut by max_tokens still stands); `tools` the
        offered ones (formats whose argument values are untyped text read their types from the schemas)."""
        return self.parser(eager=eager, tools=tools)

    # -- the prompt --------------------------------------------------------------------------------

    def prompt(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolFunction]) -> list[dict]:
        """Messages rewritten for a chat template that knows nothing of tools (agents/tool_formats/prompt.py)."""
        return with_tool_prompt(messages, tools, self.INSTRUCTION, self.write_calls)

    def write_calls(self, calls: Sequence[tuple[str, Any]]) -> str:
        """Earlier assistant calls, (name, arguments as a dict or, if not JSON, the raw text), as the model
        would have written them."""
        written = (self.CALL_OPEN + self.write_call(n, a) + self.CALL_CLOSE for n, a in calls)
        return self.LIST_OPEN + self.SEPARATOR.join(written) + self.LIST_CLOSE

    def write_call(self, name: str, arguments: Any) -> str:
        raise NotImplementedError

    # -- the grammar -------------------------------------------------------------------------------

    def grammar(self, tools: Sequence[ToolFunction], choice: ToolChoice, max_calls: int) -> Grammar | None:
        """What a forced choice allows: 1..max_calls calls of any tool (required), or exactly one call of
        the named one; None for auto and none. Raises ToolFormatError for a tool the format cannot write."""
        if not choice.forced:
            return None
        chosen = [(i, t) for i, t in enumerate(tools) if choice.mode == "required" or t.name == choice.function]
        count = max_calls if choice.mode == "required" else 1
        alternatives = " | ".join(f"fn_{k}" for k in range(len(chosen)))
        body = f"({alternatives})" if self.CALL_OPEN or self.CALL_CLOSE else alternatives
        rules = ["start: " + framed(self.LIST_OPEN, calls_rule(count, self.SEPARATOR), self.LIST_CLOSE),
                 "call: " + framed(self.CALL_OPEN, body, self.CALL_CLOSE)]
        for k, (index, tool) in enumerate(chosen):
            rules += self.function_rules(k, index, tool)
        return Grammar("\n".join(rules))

    def function_rules(self, k: int, index: int, tool: ToolFunction) -> list[str]:
        """Lark rules defining `fn_{k}` as one call of `tool` (the request's tools[index]); any helper rule
        they add ends in `_{k}`."""
        raise NotImplementedError

