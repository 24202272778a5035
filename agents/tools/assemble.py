"""Reassembling a stream of events into one ParsedOutput, checking OpenAI's stream contract on the way.

This is what a client (the openai SDK's stream helper, LangChain's tool_call_chunks) does with the deltas;
`ToolParser.parse` is defined as exactly this over the parser's own stream, so both modes always agree.
"""
from __future__ import annotations

from collections.abc import Iterable

from conch.agents.tools.types import ContentDelta, ParsedOutput, StreamEvent, ToolCall, ToolCallDelta


class StreamContractError(ValueError):
    """The events broke the contract: a call's first delta must carry id and name, later ones neither."""


def assemble(events: Iterable[StreamEvent]) -> ParsedOutput:
    """Join content and each index's argument fragments. Indices must appear in order 0, 1, 2, ..."""
    content: list[str] = []
    calls: list[tuple[str, str, list[str]]] = []  # (id, name, fragments) per index
    for event in events:
        if isinstance(event, ContentDelta):
            content.append(event.text)
        else:
            _check(event, len(calls))
            if event.is_first:
                calls.append((event.id, event.name, [event.arguments_fragment]))  # type: ignore[arg-type]
            else:
                calls[event.index][2].append(event.arguments_fragment)
    tool_calls = [ToolCall(id=i, name=n, arguments="".join(f)) for i, n, f in calls]
    return ParsedOutput(content="".join(content) or None, tool_calls=tool_calls)


def _check(delta: ToolCallDelta, started: int) -> None:
    if delta.is_first:
        if delta.index != started or not delta.name:
            raise StreamContractError(f"first delta of call {delta.index} out of order or without a name")
    elif delta.name is not None or not 0 <= delta.index < started:
        raise StreamContractError(f"later delta of call {delta.index} repeats the name or has no first delta")
