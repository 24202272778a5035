"""`context_management` (beta context-management-2025-06-27): edits Conch applies to the messages before it
renders them, in the order given, each reported in the answer's `context_management.applied_edits` when it
cleared anything.

    clear_tool_uses_20250919   when `trigger` is reached (input_tokens: the unedited prompt's tokens, default
                               100,000; or tool_uses: the number of tool_use blocks), every tool result but
                               those of the last `keep` tool uses (default 3) and of `exclude_tools` becomes
                               CLEARED_RESULT; `clear_tool_inputs` (true, or a list of tool names) empties
                               those calls' inputs too. Not applied when it would clear fewer tokens than
                               `clear_at_least`.
    clear_thinking_20251015    thinking / redacted_thinking blocks of every assistant turn but the last `keep`
                               turns that hold some (default 1; "all" keeps them all) are dropped.

`count` is the served model's token count of a text: cleared_input_tokens is the cleared texts' count."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from conch.gateway.anthropic import schemas as wire
from conch.gateway.anthropic.schemas import ClearThinking, ClearToolUses, ContextManagement, TokenCount

CLEARED_RESULT = "[tool result cleared by context management]"
DEFAULT_TRIGGER_TOKENS = 100_000
DEFAULT_KEEP_TOOL_USES = 3


Messages = list[wire.Message]
Count = Callable[[str], int]


def needs_prompt_count(management: ContextManagement | None) -> bool:
    """Whether an edit's trigger is the prompt's token count (the caller renders the unedited prompt once)."""
    return any(isinstance(e, ClearToolUses) and (e.trigger is None or e.trigger.type == "input_tokens")
               for e in management.edits) if management is not None else False


def apply_edits(management: ContextManagement, messages: Messages, prompt_tokens: int,
                count: Count) -> tuple[Messages, list[dict[str, Any]]]:
    """The edited messages and the applied edits' reports."""
    applied: list[dict[str, Any]] = []
    for edit in management.edits:
        if isinstance(edit, ClearToolUses):
            messages, report = _clear_tool_uses(edit, messages, prompt_tokens, count)
        else:
            messages, report = _clear_thinking(edit, messages, count)
        if report is not None:
            applied.append(report)
    return messages, applied


def _blocks(message: wire.Message) -> list:
    return [] if isinstance(message.content, str) else list(message.content)


def _clear_tool_uses(edit: ClearToolUses, messages: Messages, prompt_tokens: int,
                     count: Count) -> tuple[Messages, dict[str, Any] | None]:
    uses = [b for m in messages if m.role == "assistant" for b in _blocks(m) if isinstance(b, wire.ToolUseBlock)]
    trigger = edit.trigger or TokenCount(type="input_tokens", value=DEFAULT_TRIGGER_TOKENS)
    reached = (prompt_tokens if trigger.type == "input_tokens" else len(uses)) >= trigger.value
    keep = edit.keep.value if edit.keep is not None else DEFAULT_KEEP_TOOL_USES
    kept = {b.id for b in uses[len(uses) - keep:]} if keep else set()
    excluded = set(edit.exclude_tools or ())
    cleared = {b.id: b.name for b in uses if b.id not in kept and b.name not in excluded}
    if not reached or not cleared:
        return messages, None
    inputs = edit.clear_tool_inputs
    clear_input = (lambda name: inputs is True) if not isinstance(inputs, list) else (lambda name: name in inputs)
    tokens, out = 0, []
    for message in messages:
        blocks = []
        for block in _blocks(message):
            if isinstance(block, wire.ToolResultBlock) and block.tool_use_id in cleared \
                    and block.content != CLEARED_RESULT:
                tokens += count(_result_text(block))
                block = block.model_copy(update={"content": CLEARED_RESULT})
            elif isinstance(block, wire.ToolUseBlock) and block.id in cleared and clear_input(block.name) \
                    and block.input:
                tokens += count(json.dumps(block.input, ensure_ascii=False))
                block = block.model_copy(update={"input": {}})
            blocks.append(block)
        out.append(message.model_copy(update={"content": blocks}) if blocks else message)
    if edit.clear_at_least is not None and tokens < edit.clear_at_least.value:
        return messages, None
    return out, {"type": edit.type, "cleared_tool_uses": len(cleared), "cleared_input_tokens": tokens}


def _result_text(block: wire.ToolResultBlock) -> str:
    if isinstance(block.content, list):
        return "".join(b.text for b in block.content if isinstance(b, wire.TextBlock))
    return block.content or ""


def _thinking(block: Any) -> bool:
    return isinstance(block, (wire.ThinkingBlock, wire.RedactedThinkingBlock))


def _clear_thinking(edit: ClearThinking, messages: Messages, count: Count) -> tuple[Messages, dict | None]:
    if edit.keep == "all":
        return messages, None
    keep = edit.keep.value if edit.keep is not None else 1
    turns = [i for i, m in enumerate(messages) if m.role == "assistant" and any(map(_thinking, _blocks(m)))]
    dropped = set(turns[:len(turns) - keep] if keep else turns)
    if not dropped:
        return messages, None
    tokens, out = 0, []
    for i, message in enumerate(messages):
        if i in dropped:
            gone = [b for b in _blocks(message) if _thinking(b)]
            tokens += sum(count(b.thinking if isinstance(b, wire.ThinkingBlock) else b.data) for b in gone)
            message = message.model_copy(update={"content": [b for b in _blocks(message) if not _thinking(b)]})
        out.append(message)
    return out, {"type": edit.type, "cleared_thinking_turns": len(dropped), "cleared_input_tokens": tokens}
