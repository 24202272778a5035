"""One choice's model text as OpenAI message parts: content and tool calls, whole or as stream deltas.

Streaming contract (what the openai SDK's stream helper and LangChain's tool_call_chunks need): a call's
first delta carries index, id, type and function.name once; later deltas carry only argument fragments
with the same index.

A forced choice (`tool_choice` required or named) is read by the parser of the model's tool format (whose
grammar wrote it), eagerly: its text is calls only, so a call cut by max_tokens stands as a call (with the argument text
certified so far, as OpenAI's own "length" answers do), and nothing of it ever reaches `content` (what
would is the markup of a call cut before its name).
"""
from __future__ import annotations

from agents.tool_choice import ToolChoice
from agents.tools import ContentDelta, ToolCall, ToolCallDelta, ToolParser, assemble
from engine import RequestStatus


def call_dict(call: ToolCall) -> dict:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def _delta_dict(event: ToolCallDelta) -> dict:
    if event.is_first:
        part = {"index": event.index, "id": event.id, "type": "function",
                "function": {"name": event.name, "arguments": event.arguments_fragment}}
    else:
        part = {"index": event.index, "function": {"arguments": event.arguments_fragment}}
    return {"tool_calls": [part]}


_NO_TOOLS = ToolChoice("none")


class ChatOutput:
    def __init__(self, parser: ToolParser | None, choice: ToolChoice = _NO_TOOLS) -> None:
        self._parser = parser
        self._choice = choice
        self.has_calls = False

    def whole(self, text: str) -> tuple[str | None, list[dict]]:
        """(content, tool_calls) of a complete text."""
        if self._parser is None:
            return text, []
        if self._choice.forced:  # this parser is eager and unused: its own stream is the answer
            parsed = assemble(self._parser.feed(text) + self._parser.finish())
            content = None
        else:
            parsed = self._parser.parse(text)
            content = parsed.content
        self.has_calls = bool(parsed.tool_calls)
        return content, [call_dict(c) for c in parsed.tool_calls]

    def feed(self, text: str) -> list[dict]:
        if self._parser is None:
            return [{"content": text}] if text else []
        return self._deltas(self._parser.feed(text)) if text else []

    def finish(self) -> list[dict]:
        return self._deltas(self._parser.finish()) if self._parser is not None else []

    def _deltas(self, events) -> list[dict]:
        out: list[dict] = []
        for event in events:
            if isinstance(event, ContentDelta):
                if event.text and not self._choice.forced:
                    out.append({"content": event.text})
            else:
                self.has_calls = True
                out.append(_delta_dict(event))
        return out

    def finish_reason(self, status: RequestStatus | None) -> str | None:
        """OpenAI's finish_reason for a choice that ended with `status` (None: not ended)."""
        return None if status is None else self._choice.final_status(status, self.has_calls).finish_reason
