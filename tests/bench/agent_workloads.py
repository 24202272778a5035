"""Issue 33's four agent workloads as chat.completions arguments (the openai SDK's keywords, less model and
max_tokens): outputs that repeat what the prompt holds or what a grammar forces.

  tool_call  a forced call of a tool whose parameters have 6 fields
  quote      a reply that summarizes a ~600-token tool result it must quote from
  code_edit  a 40-line function rewritten with a few changes
  json       response_format json_schema (text.format in the Responses API)
"""
from __future__ import annotations

from typing import Any

EVENT = {
    "type": "object",
    "properties": {
        "title": {"type": "string"}, "date": {"type": "string"}, "start_time": {"type": "string"},
        "duration_minutes": {"type": "integer"}, "location": {"type": "string"},
        "attendees": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["title", "date", "start_time", "duration_minutes", "location", "attendees"],
    "additionalProperties": False,
}
TOOLS = [{"type": "function", "function": {"name": "create_event", "description": "Create a calendar event",
                                            "parameters": EVENT}}]
# The phrasings are the ones SmolLM2-135M follows: asked to "copy each line exactly" it writes a sentence of its
# own, and without this system line it invents a new signature instead of rewriting the function. A workload it
# does not perform measures nothing (docs/performance-journal.md, issue 33).
COPY = "You are a careful assistant. When asked to copy text, copy it exactly, character for character."
CITIES = ["Lisbon", "Oslo", "Nairobi", "Lima", "Osaka", "Toronto", "Cairo", "Perth", "Quito", "Riga"]


def _report() -> str:
    """A ~600-token tool result: one line per city, the weather and a note."""
    lines = []
    for day in range(3):
        for i, city in enumerate(CITIES):
            lines.append(f"day {day + 1}: {city}: {12 + (i * 7 + day * 3) % 20} C, "
                         f"{['sunny', 'rain', 'cloudy', 'windy'][(i + day) % 4]}, wind {5 + i * 2} km/h")
    return "\n".join(lines)


def _function() -> str:
    """A 40-line Python function."""
    body = ["def summarize_orders(orders, currency):", '    """Totals per customer and the largest order."""',
            "    totals = {}", "    largest = None"]
    for n in range(9):
        body += [f"    # pass {n}: orders of kind {n}", f"    for order in orders.get('kind_{n}', []):",
                 f"        totals[order.customer] = totals.get(order.customer, 0) + order.amount * {n + 1}",
                 "        largest = order if largest is None or order.amount > largest.amount else largest"]
    return "\n".join(body + ["    return totals, largest"])


def workloads() -> dict[str, dict[str, Any]]:
    call = {"type": "function", "function": {"name": "create_event"}}
    return {
        "tool_call": {"messages": [{"role": "user", "content":
                      "Book 'Quarterly review' on 2025-03-14 at 10:30 for 45 minutes in room Orion with "
                      "ana@example.com, bo@example.com and cy@example.com."}], "tools": TOOLS, "tool_choice": call},
        "quote": {"messages": [
            {"role": "user", "content": "What will the weather be?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "weather", "arguments": '{"days": 3}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "Weather report:\n" + _report()},
            {"role": "user", "content":
             "Repeat the weather report above word for word, then summarize it in one sentence."}]},
        "code_edit": {"messages": [{"role": "system", "content": COPY}, {"role": "user", "content":
                      "Rewrite this function with `orders` renamed to `batches` and `amount` renamed to `value`; "
                      "change nothing else and reply with the code only.\n\n" + _function()}]},
        "json": {"messages": [{"role": "user", "content":
                 "Describe a team meeting as an event: title, date, start time, duration, location, attendees."}],
                 "response_format": {"type": "json_schema", "json_schema": {"name": "event", "schema": EVENT,
                                                                            "strict": True}}},
    }
