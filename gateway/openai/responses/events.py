"""The engine's deltas -> the response's output items and its stream events, one builder for both.

A non-streamed response drains the same builder a stream does and keeps only its items, so the final streamed
response equals the non-streamed one by construction. Invariants: an item's deltas concatenate to its done
value; items are added and done in output order, one open at a time; a tool call is an item of its own, never
text; a reasoning model's thinking is a reasoning item before them (reasoning_text deltas, and summary_text
deltas when a summary was asked). Event dicts lack `sequence_number`, which the stream writer numbers
(strictly increasing)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from conch.agents.mcp.events import ToolCallRequest
from conch.agents.reasoning import ReasoningDelta
from conch.agents.tools import ContentDelta, ToolCallDelta, new_call_id
from conch.engine import GenerationDelta, RequestStatus
from conch.gateway.conversation import OutputReader
from conch.gateway.choices import Choice
from conch.gateway.openai.responses.items import new_item_id
from conch.gateway.openai.responses.output import (custom_call_item, end_status, function_call_item, logprob_entries,
                                             message_item, reasoning_item, text_part)
from conch.gateway.openai.responses.tools import ResponseTools


@dataclass(frozen=True)
class CustomInputDelta:
    """Text of a forced custom tool's input (the whole output is that input)."""

    text: str


class ForcedCustomReader:
    """The reader of an output that is one custom tool's input, written under the tool's own grammar."""

    has_calls = True

    def feed(self, text: str) -> list[Any]:
        return [CustomInputDelta(text)] if text else []

    def finish(self) -> list[Any]:
        return []

    def final_status(self, status: RequestStatus) -> RequestStatus:
        return status


@dataclass
class _Open:
    """The item being written: its index in the output, its id, and what its deltas added up to so far."""

    index: int
    item: dict[str, Any]
    text: list[str] = field(default_factory=list)
    logprobs: list[dict] = field(default_factory=list)


class OutputBuilder:
    """One model turn's output. `items` may be shared with other turns and MCP items (the response's output);
    calls to a `held` name (an MCP tool) are collected in `held_calls`, never written as items: the MCP loop
    runs them and writes their own items."""

    def __init__(self, reader: OutputReader | ForcedCustomReader, tools: ResponseTools, logprobs: bool,
                 max_tool_calls: int | None, items: list[dict[str, Any]] | None = None,
                 held: frozenset[str] = frozenset(), summary: bool = False, encrypted: bool = False) -> None:
        self.reader, self.tools, self.with_logprobs = reader, tools, logprobs
        self.summary, self.encrypted = summary, encrypted   # reasoning items: a summary, encrypted_content
        self.max_calls = max_tool_calls
        self.items: list[dict[str, Any]] = items if items is not None else []
        self.choice = Choice(0)
        self._open: _Open | None = None
        self._calls: dict[int, _Open | None] = {}      # the reader's call index -> its item (None: dropped)
        self._held_names = held
        self._held: dict[int, list[str]] = {}           # the reader's call index -> [call id, name, fragments...]
        self._pending_logprobs: list[dict] = []
        self._abandoned = False                         # the client left: what is open closes incomplete

    @property
    def held_calls(self) -> tuple[ToolCallRequest, ...]:
        return tuple(ToolCallRequest(call[1], "".join(call[2:]), call[0]) for call in self._held.values())

    @property
    def client_calls(self) -> bool:
        """Whether this turn called a tool of the client's own (a function or custom tool item)."""
        return any(c is not None for c in self._calls.values())

    @property
    def status(self) -> RequestStatus | None:
        return self.reader.final_status(self.choice.status) if self.choice.status is not None else None

    def feed(self, delta: GenerationDelta) -> list[dict[str, Any]]:
        self.choice.add(delta)
        if self.with_logprobs and delta.logprobs:
            self._pending_logprobs += logprob_entries(list(delta.logprobs))
        events = self.reader.feed(delta.text) + (self.reader.finish() if delta.finished else [])
        out = [e for event in events for e in self._on(event)]
        return out + self._close() if delta.finished else out

    def _on(self, event: Any) -> list[dict[str, Any]]:
        if isinstance(event, ReasoningDelta):
            return self._reasoning(event.text)
        if isinstance(event, ContentDelta):
            return self._text(event.text)
        if isinstance(event, CustomInputDelta):
            return self._custom_input(event.text)
        assert isinstance(event, ToolCallDelta)
        return self._call(event)

    def _text(self, text: str) -> list[dict[str, Any]]:
        out = [] if self._open_is("message") else self._close() + self._add(
            message_item(new_item_id("message"), "", "in_progress", None))
        if out:
            out.append({"type": "response.content_part.added", **self._where(), "part": text_part("", [])})
        assert self._open is not None
        logprobs, self._pending_logprobs = self._pending_logprobs, []
        self._open.text.append(text)
        self._open.logprobs += logprobs
        return out + [{"type": "response.output_text.delta", **self._where(), "delta": text, "logprobs": logprobs}]

    def _reasoning(self, text: str) -> list[dict[str, Any]]:
        """Reasoning text: reasoning_text deltas, and summary_text deltas of summary 0 when a summary was asked."""
        out: list[dict[str, Any]] = []
        if not self._open_is("reasoning"):
            out = self._close() + self._add(reasoning_item(new_item_id("reasoning"), "", False, False,
                                                           "in_progress"))
            if self.summary:
                out.append({"type": "response.reasoning_summary_part.added", **self._where(False),
                            "summary_index": 0, "part": {"type": "summary_text", "text": ""}})
        assert self._open is not None
        self._open.text.append(text)
        out.append({"type": "response.reasoning_text.delta", **self._where(), "delta": text})
        if self.summary:
            out.append({"type": "response.reasoning_summary_text.delta", **self._where(False), "summary_index": 0,
                        "delta": text})
        return out

    def _custom_input(self, text: str) -> list[dict[str, Any]]:
        out = self._start_custom(self.tools.forced_custom.name) if self._open is None else []  # type: ignore
        self._open.text.append(text)                                                            # type: ignore
        return out + [{"type": "response.custom_tool_call_input.delta", **self._where(False), "delta": text}]

    def _start_custom(self, name: str) -> list[dict[str, Any]]:
        return self._add(custom_call_item(new_item_id("custom_tool_call"), new_call_id(), name, ""))

    def _call(self, event: ToolCallDelta) -> list[dict[str, Any]]:
        if event.is_first and event.name in self._held_names:
            self._held[event.index] = [event.id or new_call_id(), event.name or "", event.arguments_fragment]
            return []
        if event.index in self._held:
            self._held[event.index].append(event.arguments_fragment)
            return []
        if event.is_first:
            started = sum(1 for c in self._calls.values() if c is not None)
            if self.max_calls is not None and started >= self.max_calls:
                self._calls[event.index] = None               # past max_tool_calls: the call is dropped
                return []
            out = self._close()
            if event.name in self.tools.custom:               # its input is buffered: the fragments are JSON
                out += self._start_custom(event.name or "")
                self._open.item["call_id"] = event.id         # type: ignore[union-attr]
            else:
                out += self._add(function_call_item(new_item_id("function_call"), event.id or new_call_id(),
                                                    event.name or "", "", "in_progress",
                                                    self.tools.namespaces.get(event.name or "")))
            self._calls[event.index] = self._open
            return out + self._fragment(event.arguments_fragment)
        if self._calls.get(event.index) is None or self._open is not self._calls[event.index]:
            return []
        return self._fragment(event.arguments_fragment)

    def _fragment(self, text: str) -> list[dict[str, Any]]:
        assert self._open is not None
        self._open.text.append(text)
        if not text or self._open.item["type"] != "function_call":
            return []
        return [{"type": "response.function_call_arguments.delta", **self._where(False), "delta": text}]

    def finish(self) -> list[dict[str, Any]]:
        """Closes what is open (a stream that ended without a finished delta)."""
        return self._close()

    def abandon(self) -> list[dict[str, Any]]:
        """The output when the client left mid-stream: an item still open is closed `incomplete`."""
        self._abandoned = True
        self._close()
        return self.items

    def _add(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        self._open = _Open(len(self.items), item)
        self.items.append(item)
        return [{"type": "response.output_item.added", "output_index": self._open.index, "item": dict(item)}]

    def _open_is(self, kind: str) -> bool:
        return self._open is not None and self._open.item["type"] == kind

    def _where(self, content: bool = True) -> dict[str, Any]:
        assert self._open is not None
        where = {"item_id": self._open.item["id"], "output_index": self._open.index}
        return {**where, "content_index": 0} if content else where

    def _close(self) -> list[dict[str, Any]]:
        """The open item's done events, its final form written into `items`."""
        if self._open is None:
            return []
        opened, self._open = self._open, None
        item, text = opened.item, "".join(opened.text)
        status = "incomplete" if self._abandoned or end_status(self.status)[0] == "incomplete" else "completed"
        closing = _CLOSERS[item["type"]](self, opened, text, status)
        self.items[opened.index] = opened.item
        return closing + [{"type": "response.output_item.done", "output_index": opened.index, "item": opened.item}]

    def _close_message(self, opened: _Open, text: str, status: str) -> list[dict[str, Any]]:
        logprobs = (opened.logprobs + self._pending_logprobs) if self.with_logprobs else None
        self._pending_logprobs = []
        opened.item = message_item(opened.item["id"], text, status, logprobs)
        part = opened.item["content"][0]
        where = {"item_id": opened.item["id"], "output_index": opened.index, "content_index": 0}
        return [{"type": "response.output_text.done", **where, "text": text, "logprobs": logprobs or []},
                {"type": "response.content_part.done", **where, "part": part}]

    def _close_reasoning(self, opened: _Open, text: str, status: str) -> list[dict[str, Any]]:
        opened.item = reasoning_item(opened.item["id"], text, self.summary, self.encrypted, status)
        where = {"item_id": opened.item["id"], "output_index": opened.index}
        out = [{"type": "response.reasoning_text.done", **where, "content_index": 0, "text": text}]
        if self.summary:
            part = {"type": "summary_text", "text": text}
            out += [{"type": "response.reasoning_summary_text.done", **where, "summary_index": 0, "text": text},
                    {"type": "response.reasoning_summary_part.done", **where, "summary_index": 0, "part": part}]
        return out

    def _close_call(self, opened: _Open, text: str, status: str) -> list[dict[str, Any]]:
        item = opened.item
        opened.item = function_call_item(item["id"], item["call_id"], item["name"], text, status,
                                         item.get("namespace"))
        return [{"type": "response.function_call_arguments.done", "item_id": item["id"],
                 "output_index": opened.index, "name": item["name"], "arguments": text}]

    def _close_custom(self, opened: _Open, text: str, status: str) -> list[dict[str, Any]]:
        item = opened.item
        value = text if self.tools.forced_custom is not None else _input_of(text)
        opened.item = custom_call_item(item["id"], item["call_id"], item["name"], value)
        where = {"item_id": item["id"], "output_index": opened.index}
        deltas = [] if self.tools.forced_custom is not None or not value else [
            {"type": "response.custom_tool_call_input.delta", **where, "delta": value}]
        return deltas + [{"type": "response.custom_tool_call_input.done", **where, "input": value}]


_CLOSERS = {"reasoning": OutputBuilder._close_reasoning, "message": OutputBuilder._close_message,
            "function_call": OutputBuilder._close_call,
            "custom_tool_call": OutputBuilder._close_custom}


def _input_of(arguments: str) -> str:
    """A custom tool called as a function of one string: the string (the arguments as they are if cut short)."""
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
    return value.get("input", arguments) if isinstance(value, dict) and isinstance(value.get("input"), str) \
        else arguments
