"""Checks shared by the Responses tests: every response object and streamed event validated against the
openai package's own types, and the stream's invariants."""
from __future__ import annotations

import json
from typing import Any

import httpx
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

EVENT = TypeAdapter(ResponseStreamEvent)
TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def valid_response(body: dict[str, Any]) -> Response:
    return Response.model_validate(body)


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = httpx.post(f"{url}/v1/responses", json=body, timeout=600)
    assert reply.status_code == 200, reply.text
    valid_response(reply.json())
    return reply.json()


def stream_events(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The raw events of a streamed request, each validated; the stream's own invariants checked."""
    events = []
    with httpx.stream("POST", f"{url}/v1/responses", json={**body, "stream": True}, timeout=600) as reply:
        assert reply.status_code == 200
        for line in reply.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line[len("data: "):])
                EVENT.validate_python(event)
                events.append(event)
    check_stream(events)
    return events


def check_stream(events: list[dict[str, Any]]) -> None:
    """Strictly increasing sequence numbers; created, in_progress first; exactly one terminal event, last; each
    item's deltas concatenate to its done value."""
    numbers = [e["sequence_number"] for e in events]
    assert numbers == sorted(set(numbers))
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    assert [e["type"] for e in events if e["type"] in TERMINAL] == [events[-1]["type"]]
    valid_response(events[-1]["response"])
    pieces: dict[tuple[str, str], list[str]] = {}
    for e in events:
        kind = e["type"]
        if kind.endswith(".delta"):
            pieces.setdefault((e["item_id"], kind[:-len(".delta")]), []).append(e["delta"])
        done = {"response.output_text.done": "text", "response.function_call_arguments.done": "arguments",
                "response.custom_tool_call_input.done": "input"}.get(kind)
        if done:
            assert "".join(pieces.get((e["item_id"], kind[:-len(".done")]), [])) == e[done]


def comparable(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Output items without their fresh ids."""
    return [{k: v for k, v in item.items() if k not in ("id", "call_id")} for item in output]
