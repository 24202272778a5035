"""What the asyncio side sends the engine thread: typed commands, queued in its inbox and applied between two
steps (engine_core.py), so the scheduler is only ever touched by that thread."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable

from conch.engine.backends.conch.core.sequence import Sequence


@dataclass(frozen=True)
class Add:
    """A request's choices, one sequence each, to schedule."""

    sequences: tuple[Sequence, ...]


@dataclass(frozen=True)
class Abort:
    """Stop a request's choice (`index`), or all of its choices (None); their KV is freed at the next step."""

    request_id: str
    index: int | None = None


@dataclass(frozen=True)
class Call:
    """fn(*args) run on the engine thread (its torch state lives there); `done` gets the result or the error."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    done: asyncio.Future


Command = Add | Abort | Call
