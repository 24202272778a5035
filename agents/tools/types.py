"""The values tool calling passes around: tools offered, calls parsed, and streamed call deltas.

Plain frozen dataclasses (no pydantic below the gateway). `ToolCall.arguments` and every
`ToolCallDelta.arguments_fragment` are text in Conch's canonical argument form (see `canonical.py`).
"""
from __future__ import annotations

import json
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

from conch.agents.tools.canonical import dumps

_ID_ALPHABET = string.ascii_letters + string.digits
_ID_LENGTH = 24  # OpenAI's own ids carry 24; the contract asks for at least 9


def new_call_id() -> str:
    """A fresh OpenAI-style call id: "call_" + 24 random alphanumerics from `secrets`."""
    return "call_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_LENGTH))


@dataclass(frozen=True)
class ToolFunction:
    """A function offered to the model. `parameters` is its JSON schema, given as a mapping or JSON text and
    always stored as canonical JSON text, so the value stays hashable and can key caches (the gateway has
    validated the schema; invalid JSON text raises ValueError). Key order is kept: it is the order the
    schema's properties are rendered and constrained in."""

    name: str
    description: str = ""
    parameters: str = '{"type":"object","properties":{}}'

    def __post_init__(self) -> None:
        schema = self.parameters if isinstance(self.parameters, Mapping) else json.loads(self.parameters)
        object.__setattr__(self, "parameters", dumps(dict(schema)))

    @property
    def schema(self) -> dict[str, Any]:
        """The parameters schema as a fresh dict (callers may mutate it)."""
        return json.loads(self.parameters)


@dataclass(frozen=True)
class ToolCall:
    """One complete call. `arguments` is a JSON object in canonical text form, never a dict."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of a streamed call. Invariant (OpenAI's stream contract): the first delta of each `index`
    carries `id` and `name` (and an empty fragment); every later delta of that index has both None and
    only carries `arguments_fragment`. The fragments of one index concatenate to `ToolCall.arguments`."""

    index: int
    id: str | None
    name: str | None
    arguments_fragment: str = ""

    @property
    def is_first(self) -> bool:
        return self.id is not None


@dataclass(frozen=True)
class ContentDelta:
    """Text of the message that is not part of any tool call."""

    text: str


StreamEvent = Union[ContentDelta, ToolCallDelta]


@dataclass(frozen=True)
class ParsedOutput:
    """A whole model text, split: `content` is None when no text outside the calls remains."""

    content: str | None
    tool_calls: list[ToolCall]
