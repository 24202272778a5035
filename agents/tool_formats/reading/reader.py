"""What every incremental reader of tool-call text shares: it walks its own `_Mode` enum until it reaches
that enum's DONE or FAILED member (JsonReader, CallObjectReader, CallScanner).

A reader names its enum once, `class JsonReader(Reader, modes=_Mode)`, and gets `done`, `failed` and
`_fail` from here; the enum must have DONE and FAILED members.
"""
from __future__ import annotations

import enum
import re
from typing import Any, ClassVar


class Reader:
    _DONE: ClassVar[enum.Enum]
    _FAILED: ClassVar[enum.Enum]
    _mode: enum.Enum

    def __init_subclass__(cls, *, modes: type[enum.Enum], **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._DONE, cls._FAILED = modes["DONE"], modes["FAILED"]

    @property
    def done(self) -> bool:
        return self._mode is self._DONE

    @property
    def failed(self) -> bool:
        return self._mode is self._FAILED

    def _fail(self, pos: int) -> int:
        """Stop at `pos`, the first character that cannot belong to what is read; return it."""
        self._mode = self._FAILED
        return pos


def run_end(run: re.Pattern[str], text: str, pos: int) -> int:
    """Where `run` stops matching text from `pos` (`pos` itself if it matches nothing there)."""
    match = run.match(text, pos)
    return match.end() if match is not None else pos
