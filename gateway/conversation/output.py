"""One choice's model text read back as content and tool calls, whole or as stream events, for any face.

Streaming contract (what the openai SDK's stream helper, LangChain's tool_call_chunks and Anthropic's
input_json_delta accumulators need): a reasoning model's thinking comes first, as ReasoningDelta events (never
through the tool parser: a call written inside the thinking is thought, not called); a call's first event
carries index, id and name once; later events carry only argument fragments with the same index; the fragments
concatenate to the call's arguments.

A forced choice (`tool_choice` required or named) is read by the parser of the model's tool format (whose
grammar wrote it), eagerly: its text is calls only, so a call cut by max_tokens stands as a call (with the
argument text certified so far, as OpenAI's own "length" answers do), and nothing of it ever reaches content
(what would is the markup of a call cut before its name)."""
from __future__ import annotations

from typing import Union

from conch.agents.reasoning import ReasoningDelta, ReasoningEvent, ReasoningParser
from conch.agents.tool_choice import ToolChoice
from conch.agents.tool_formats import ToolParser
from conch.agents.tools import ContentDelta, ParsedOutput, StreamEvent, assemble
from conch.engine import RequestStatus
from conch.gateway.conversation.tools import ToolPlan

_NO_TOOLS = ToolChoice("none")
OutputEvent = Union[ReasoningDelta, StreamEvent]


class OutputReader:
    def __init__(self, parser: ToolParser | None, choice: ToolChoice = _NO_TOOLS,
                 reasoning: ReasoningParser | None = None) -> None:
        self._parser = parser
        self._choice = choice
        self._reasoning = reasoning
        self.has_calls = False
        self.reasoning = ""          # the reasoning read so far (all of it, after whole() or finish())

    @classmethod
    def for_plan(cls, plan: ToolPlan) -> "OutputReader":
        """A reader of one choice of a request planned as `plan`."""
        reasoning = plan.reasoning[0].new_parser(plan.reasoning[1]) if plan.reasoning is not None else None
        if not plan.parses_calls or plan.format is None:
            return cls(None, reasoning=reasoning)
        # forced: read eagerly (the grammar wrote calls only, so a call cut by max_tokens still stands)
        return cls(plan.format.new_parser(eager=plan.choice.forced, tools=plan.tools), plan.choice, reasoning)

    def whole(self, text: str) -> ParsedOutput:
        """The content and calls of a complete text (its reasoning in `self.reasoning`)."""
        if self._reasoning is not None:
            text = "".join(e.text for e in self._split(self._reasoning.feed(text) + self._reasoning.finish()))
        if self._parser is None:
            return ParsedOutput(text, [])
        if self._choice.forced:  # this parser is eager and unused: its own stream is the answer
            parsed = assemble(self._parser.feed(text) + self._parser.finish())
            parsed = ParsedOutput(None, parsed.tool_calls)
        else:
            parsed = self._parser.parse(text)
        self.has_calls = bool(parsed.tool_calls)
        return parsed

    def feed(self, text: str) -> list[OutputEvent]:
        """The events that `text`, the next piece of the stream, completes: reasoning first, as it comes."""
        if not text:
            return []
        if self._reasoning is not None:
            return self._answer(self._reasoning.feed(text), final=False)
        if self._parser is None:
            return [ContentDelta(text)]
        return self._events(self._parser.feed(text))

    def finish(self) -> list[OutputEvent]:
        if self._reasoning is not None:
            return self._answer(self._reasoning.finish(), final=True)
        return self._events(self._parser.finish()) if self._parser is not None else []

    def _split(self, events: list[ReasoningEvent]) -> list[ContentDelta]:
        """The answer's pieces of `events`; their reasoning kept in `self.reasoning`."""
        for event in events:
            if isinstance(event, ReasoningDelta):
                self.reasoning += event.text
        return [e for e in events if isinstance(e, ContentDelta)]

    def _answer(self, events: list[ReasoningEvent], final: bool) -> list[OutputEvent]:
        """Reasoning events as they are; the answer's text through the tool parser (if any)."""
        out: list[OutputEvent] = []
        for event in events:
            if isinstance(event, ReasoningDelta):
                self.reasoning += event.text
                out.append(event)
            elif self._parser is None:
                out.append(event)
            else:
                out += self._events(self._parser.feed(event.text))
        if final and self._parser is not None:
            out += self._events(self._parser.finish())
        return out

    def _events(self, events: list[StreamEvent]) -> list[OutputEvent]:
        out: list[OutputEvent] = []
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
