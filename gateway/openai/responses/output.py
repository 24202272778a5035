"""The response object exactly as OpenAI returns it, and its output items, from plain values.

A response is a dict in the wire's shape from its first moment (queued, in_progress) to its last (completed,
incomplete, failed, cancelled); the store keeps it as it is. `echo` is the request's settings as the response
repeats them (OpenAI's defaults where the request left a field out)."""
from __future__ import annotations

import time
import uuid
from typing import Any

from conch.engine import RequestStatus
from conch.engine.types import PositionLogprobs
from conch.gateway.choices import Choice
from conch.gateway.conversation.sealed import seal
from conch.gateway.openai.responses.schemas import ResponsesRequest

# An engine's end -> (the response's status, incomplete_details)
_STATUS: dict[RequestStatus, tuple[str, dict[str, str] | None]] = {
    RequestStatus.FINISHED_STOPPED: ("completed", None),
    RequestStatus.FINISHED_TOOL_CALLS: ("completed", None),
    RequestStatus.FINISHED_LENGTH: ("incomplete", {"reason": "max_output_tokens"}),
    RequestStatus.FINISHED_ABORTED: ("cancelled", None),
    RequestStatus.FINISHED_ERROR: ("failed", None),
}


def new_response_id() -> str:
    return f"resp_{uuid.uuid4().hex}"


def end_status(status: RequestStatus | None) -> tuple[str, dict[str, str] | None]:
    return _STATUS.get(status, ("failed", None)) if status is not None else ("failed", None)


def echo(body: ResponsesRequest, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The request's settings as the response repeats them."""
    fmt = body.output_format or {"type": "text"}
    return {
        "model": body.model, "instructions": body.instructions, "tools": tools,
        "tool_choice": body.choice if body.tool_choice is not None else "auto",
        "parallel_tool_calls": body.parallel_tool_calls is not False, "max_tool_calls": body.max_tool_calls,
        "max_output_tokens": body.max_output_tokens,
        "temperature": body.temperature if body.temperature is not None else 1.0,
        "top_p": body.top_p if body.top_p is not None else 1.0, "top_logprobs": body.top_logprobs or 0,
        "presence_penalty": body.presence_penalty or 0.0, "frequency_penalty": body.frequency_penalty or 0.0,
        "text": {"format": fmt, "verbosity": "medium"},
        "reasoning": {"effort": body.effort, "summary": body.summary_mode},
        "store": body.stored, "background": bool(body.background), "truncation": "disabled",
        "previous_response_id": body.previous_response_id,
        "conversation": {"id": body.conversation_id} if body.conversation_id else None,
        "metadata": body.metadata or {}, "user": body.user, "prompt_cache_key": body.prompt_cache_key,
        "safety_identifier": body.safety_identifier, "service_tier": "default",
    }


def response_object(response_id: str, settings: dict[str, Any], status: str, *, created_at: float | None = None,
                    output: list[dict[str, Any]] | None = None, usage: dict[str, Any] | None = None,
                    incomplete: dict[str, str] | None = None, error: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "id": response_id, "object": "response", "created_at": created_at or int(time.time()), "status": status,
        "error": error, "incomplete_details": incomplete, **settings, "output": output or [], "usage": usage,
        "completed_at": int(time.time()) if status == "completed" else None,
    }


def usage_dict(choice: Choice) -> dict[str, Any]:
    """input_tokens_details.cached_tokens is the engine's: prompt tokens a kept slot or the prefix cache held;
    cache_write_tokens the rest, computed now and kept for the next turn."""
    details = {"cached_tokens": choice.cached_tokens,
               "cache_write_tokens": max(0, choice.prompt_tokens - choice.cached_tokens)}
    return {"input_tokens": choice.prompt_tokens, "input_tokens_details": details,
            "output_tokens": choice.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": choice.reasoning_tokens},
            "total_tokens": choice.prompt_tokens + choice.completion_tokens}


def message_item(item_id: str, text: str, status: str, logprobs: list[dict] | None) -> dict[str, Any]:
    return {"id": item_id, "type": "message", "role": "assistant", "status": status,
            "content": [text_part(text, logprobs)]}


def reasoning_item(item_id: str, text: str, summary: bool, encrypted: bool, status: str) -> dict[str, Any]:
    """The reasoning as an item: its text as `content` (reasoning_text), as its summary when one was asked,
    and sealed as `encrypted_content` when include asked for it (read back on a later turn's input)."""
    item: dict[str, Any] = {"id": item_id, "type": "reasoning", "status": status,
                            "summary": [{"type": "summary_text", "text": text}] if summary and text else [],
                            "content": [{"type": "reasoning_text", "text": text}]}
    if encrypted:
        item["encrypted_content"] = seal(text)
    return item


def text_part(text: str, logprobs: list[dict] | None) -> dict[str, Any]:
    """`logprobs` is always a list, empty unless they were asked (OpenAI's shape; Open Responses requires it)."""
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []}


def function_call_item(item_id: str, call_id: str, name: str, arguments: str, status: str,
                       namespace: str | None = None) -> dict[str, Any]:
    """`namespace`: the namespace tool the called function came from (its name is the function's own)."""
    item = {"id": item_id, "type": "function_call", "call_id": call_id, "name": name, "arguments": arguments,
            "status": status}
    return {**item, "namespace": namespace} if namespace is not None else item


def custom_call_item(item_id: str, call_id: str, name: str, text: str) -> dict[str, Any]:
    return {"id": item_id, "type": "custom_tool_call", "call_id": call_id, "name": name, "input": text}


def logprob_entries(items: list[PositionLogprobs]) -> list[dict[str, Any]]:
    def entry(t) -> dict[str, Any]:
        return {"token": t.token, "logprob": t.logprob, "bytes": list(t.token.encode("utf-8"))}

    return [{**entry(p.chosen), "top_logprobs": [entry(t) for t in p.top]} for p in items]


def failure(message: str) -> dict[str, str]:
    return {"code": "server_error", "message": message}
