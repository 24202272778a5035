"""One choice's model text read back as content and tool calls, whole or as stream events, for any face.

Streaming contract (what the openai SDK's stream helper, LangChain's tool_call_chunks and Anthropic's
input_json_delta accumulators need): a call's first event carries index, id and name once; later events carry
only argument fragments with the same index; the fragments concatenate to the call's arguments.

A forced choice (`tool_choice` required or named) is read by the parser of the model's tool format (whose
grammar wrote it), eagerly: its text is calls only, so a call cut by max_tokens stands as a call (with the
argument text certified so far, as OpenAI's own "length" answers do), and nothing of it ever reaches content
(what would is the markup of a call cut before its name)."""
from __future__ import annotations

from conch.agents.tool_choice import ToolChoice
from conch.agents.tool_formats import ToolParser
from conch.agents.tools import ContentDelta, ParsedOutput, StreamEvent, assemble
from conch.engine import RequestStatus
from conch.gateway.conversation.tools import ToolPlan

_NO_TOOLS = ToolChoice("none")


class OutputReader:
    def __init__(self, parser: ToolParser | None, choice: ToolChoice = _NO_TOOLS) -> None:
        self._parser = parser
        self._choice = choice
        self.has_calls = False

    @classmethod
    def for_plan(cls, plan: ToolPlan) -> "OutputReader":
        """A reader of one choice of a request planned as `plan`."""
        if not plan.parses_calls or plan.format is None:
            return cls(None)
        # forced: read eagerly (the grammar wrote calls only, so a call cut by max_tokens still stands)
        return cls(plan.format.new_parser(eager=plan.choice.forced), plan.choice)

    def whole(self, text: str) -> ParsedOutput:
        """The content and calls of a complete text."""
        if self._parser is None:
            return ParsedOutput(text, [])
        if self._choice.forced:  # this parser is eager and unused: its own stream is the answer
            parsed = assemble(self._parser.feed(text) + self._parser.finish())
            parsed = ParsedOutput(None, parsed.tool_calls)
        else:
            parsed = self._parser.parse(text)
        self.has_calls = bool(parsed.tool_calls)
        return parsed

    def feed(self, text: str) -> list[StreamEvent]:
        """The events that `text`, the next piece of the stream, completes."""
        if self._parser is None:
            return [ContentDelta(text)] if text else []
        return self._events(self._parser.feed(text)) if text else []

    def finish(self) -> list[StreamEvent]:
        return self._events(self._parser.finish()) if self._parser is not None else []

    def _events(self, events: list[StreamEvent]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for event in events:
            if isinstance(event, ContentDelta):
                if event.text and not self._choice.forced:
                    out.append(event)
            else:
                self.has_calls = True
                out.append(event)
        return out

    def final_status(self, status: RequestStatus) -> RequestStatus:
        """The status a choice that ended with `status` reports (FINISHED_TOOL_CALLS when the model called)."""
        return self._choice.final_status(status, self.has_calls)

    def finish_reason(self, status: RequestStatus | None) -> str | None:
        """OpenAI's finish_reason for a choice that ended with `status` (None: not ended)."""
        return None if status is None else self.final_status(status).finish_reason
