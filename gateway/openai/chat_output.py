"""Chat completions' message parts: the shared reader's content and call events as OpenAI chat's dicts."""
from __future__ import annotations

from conch.agents.reasoning import ReasoningDelta
from conch.agents.tools import ContentDelta, ToolCall, ToolCallDelta
from conch.gateway.conversation.output import OutputEvent


def call_dict(call: ToolCall) -> dict:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def delta_dict(event: OutputEvent) -> dict:
    """A stream event as a chat chunk's `delta`: a call's first delta carries index, id, type and name;
    reasoning travels in its own deltas, `reasoning_content` (vLLM's and DeepSeek's field)."""
    if isinstance(event, ReasoningDelta):
        return {"reasoning_content": event.text}
    if isinstance(event, ContentDelta):
        return {"content": event.text}
    assert isinstance(event, ToolCallDelta)
    if event.is_first:
        part = {"index": event.index, "id": event.id, "type": "function",
                "function": {"name": event.name, "arguments": event.arguments_fragment}}
    else:
        part = {"index": event.index, "function": {"arguments": event.arguments_fragment}}
    return {"tool_calls": [part]}
