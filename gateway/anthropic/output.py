"""The message object a Messages request answers with, and the pieces the stream shares with it (ids,
stop_reason, usage).

Usage follows Anthropic's arithmetic: `input_tokens` are the prompt tokens computed for this request, and
`cache_read_input_tokens` those whose KV was reused (a kept slot or the prefix cache: the engine's
Usage.cached_tokens), so input_tokens + cache_read_input_tokens + cache_creation_input_tokens is the whole
prompt, which is what count_tokens answers. Conch keeps KV without being asked, so nothing is billed as a
cache write: cache_creation_input_tokens is 0."""
from __future__ import annotations

import secrets
import string
import uuid
from dataclasses import dataclass

from pydantic_core import from_json

from conch.agents.tools import ToolCall
from conch.engine import RequestStatus
from conch.gateway.conversation import OutputReader
from conch.gateway.choices import Choice
from conch.gateway.conversation.sealed import seal

_ALPHABET = string.ascii_letters + string.digits


def message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


def tool_use_id() -> str:
    return "toolu_" + "".join(secrets.choice(_ALPHABET) for _ in range(24))


@dataclass(frozen=True)
class Stop:
    reason: str                 # end_turn | max_tokens | stop_sequence | tool_use
    sequence: str | None = None


def stop_of(status: RequestStatus, stop_reason: str | int | None, stop_sequences: list[str],
            output: OutputReader) -> Stop:
    """Anthropic's stop_reason for a choice that ended with `status` (after a stop string or token id
    `stop_reason`). Any call, forced or chosen, ends a turn as tool_use, unless max_tokens cut it."""
    if status == RequestStatus.FINISHED_LENGTH:
        return Stop("max_tokens")
    if output.has_calls:
        return Stop("tool_use")
    if isinstance(stop_reason, str) and stop_reason in stop_sequences:
        return Stop("stop_sequence", stop_reason)
    return Stop("end_turn")


def usage(prompt_tokens: int, cached_tokens: int, output_tokens: int, thinking_tokens: int = 0) -> dict:
    """output_tokens counts the thinking too; output_tokens_details.thinking_tokens says how many of them."""
    return {"input_tokens": prompt_tokens - cached_tokens, "output_tokens": output_tokens,
            "cache_read_input_tokens": cached_tokens, "cache_creation_input_tokens": 0,
            "output_tokens_details": {"thinking_tokens": thinking_tokens}}


def thinking_block(reasoning: str, omitted: bool) -> dict:
    """The reply's reasoning as a block: its text with this deployment's seal of it as the signature, or, when
    the client asked `display: "omitted"`, a redacted_thinking block holding only the sealed text."""
    if omitted:
        return {"type": "redacted_thinking", "data": seal(reasoning)}
    return {"type": "thinking", "thinking": reasoning, "signature": seal(reasoning)}


def tool_input(arguments: str) -> dict:
    """A call's arguments as the `input` object, which always parses: a call cut by max_tokens keeps what its
    text holds so far (parsed as partial JSON, as the SDK's stream accumulator reads input_json_delta)."""
    try:
        value = from_json(arguments or "{}", allow_partial=True)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def tool_use_block(call: ToolCall) -> dict:
    return {"type": "tool_use", "id": tool_use_id(), "name": call.name, "input": tool_input(call.arguments)}


def message(msg_id: str, model: str, choice: Choice, output: OutputReader, stop_sequences: list[str],
            omitted: bool = False) -> dict:
    """The whole message of a finished, non-streamed choice (`omitted`: thinking display "omitted")."""
    parsed = output.whole(choice.content)
    content: list[dict] = [thinking_block(output.reasoning, omitted)] if output.reasoning else []
    content += [{"type": "text", "text": parsed.content}] if parsed.content else []
    content += [tool_use_block(call) for call in parsed.tool_calls]
    assert choice.status is not None        # collect() returns finished choices only
    stop = stop_of(choice.status, choice.stop_reason, stop_sequences, output)
    return {"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop.reason, "stop_sequence": stop.sequence,
            "usage": usage(choice.prompt_tokens, choice.cached_tokens, choice.completion_tokens,
                           choice.reasoning_tokens)}
