"""Stop strings: text that might still become a stop string is held back until it cannot."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StopResult:
    text: str                 # safe to emit now
    stopped_by: str | None    # the stop string that matched, if any


class StopChecker:
    def __init__(self, stops: tuple[str, ...], include_stop: bool = False) -> None:
        self._stops = tuple(s for s in stops if s)
        self._include = include_stop
        self._held = ""

    def feed(self, text: str) -> StopResult:
        if not self._stops:
            return StopResult(text, None)
        buf = self._held + text
        hit = self._first_match(buf)
        if hit is not None:
            pos, stop = hit
            self._held = ""
            return StopResult(buf[: pos + (len(stop) if self._include else 0)], stop)
        keep = self._partial_suffix(buf)
        self._held = buf[len(buf) - keep:] if keep else ""
        return StopResult(buf[: len(buf) - keep], None)

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held

    def _first_match(self, buf: str) -> tuple[int, str] | None:
        best: tuple[int, str] | None = None
        for stop in self._stops:
            pos = buf.find(stop)
            if pos >= 0 and (best is None or pos < best[0]):
                best = (pos, stop)
        return best

    def _partial_suffix(self, buf: str) -> int:
        """Length of the longest suffix of `buf` that is a proper prefix of some stop string."""
        longest = 0
        for stop in self._stops:
            for k in range(min(len(stop) - 1, len(buf)), longest, -1):
                if buf.endswith(stop[:k]):
                    longest = k
                    break
        return longest
