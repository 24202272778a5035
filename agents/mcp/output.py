"""A tool result as the text the model reads: text blocks joined, other blocks described, bounded in bytes."""
from __future__ import annotations

import json
from typing import Any

from conch.agents.mcp.types import CallOutput

TRUNCATION_NOTE = "\n[output truncated by the gateway: {shown} of {total} bytes shown]"


def render_content(content: list[Any], structured: Any = None) -> str:
    """Text blocks as they are; images, audio and resources as a one-line note (the model cannot read bytes).
    A result with no content but structured content gives that content as JSON."""
    parts = []
    for block in content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {getattr(block, 'mime_type', '') or 'unknown type'}]")
        elif kind == "resource_link":
            parts.append(f"[resource: {block.uri}]")
        elif kind == "resource":
            parts.append(getattr(block.resource, "text", None) or f"[resource: {block.resource.uri}]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    if not parts and structured is not None:
        return json.dumps(structured, ensure_ascii=False)
    return "\n".join(parts)


def bounded(text: str, max_bytes: int) -> CallOutput:
    """`text` cut to at most `max_bytes` UTF-8 bytes including the note that says so (never inside a
    character)."""
    data = text.encode()
    if len(data) <= max_bytes:
        return CallOutput(text)
    note = TRUNCATION_NOTE.format(shown="{shown}", total=len(data))
    room = max(0, max_bytes - len(note.encode()) - 8)          # 8: the digits `{shown}` grows by, at most
    head = data[:room].decode(errors="ignore")
    shown = len(head.encode())
    return CallOutput(head + note.format(shown=shown), truncated=True)
