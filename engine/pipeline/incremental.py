"""Incremental detokenization: text grows token by token and never ends inside a UTF-8 character.

Invariant: `tokens[prefix:read]` decodes to text already emitted; each call decodes `tokens[prefix:]`
and emits only what lies past that, once it no longer ends in the replacement character U+FFFD.
"""
from __future__ import annotations

from typing import Protocol, Sequence


class _Decoder(Protocol):
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...


_WINDOW = 6  # tokens of left context kept so that merged pieces (leading spaces) decode the same


class IncrementalDetokenizer:
    def __init__(self, tokenizer: _Decoder, skip_special_tokens: bool = True) -> None:
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = []
        self._prefix = 0
        self._read = 0

    def add(self, token_id: int) -> str:
        """Append one token; return the newly completed text (possibly empty)."""
        self._ids.append(token_id)
        window = self._ids[self._prefix:]
        done = self._tok.decode(window[: self._read - self._prefix], skip_special_tokens=self._skip)
        full = self._tok.decode(window, skip_special_tokens=self._skip)
        if full.endswith("\ufffd") or len(full) <= len(done):
            return ""
        new = full[len(done):]
        self._read = len(self._ids)
        self._prefix = max(0, self._read - _WINDOW)
        return new

    def flush(self) -> str:
        """Text held back at the end (an incomplete character is emitted as U+FFFD)."""
        window = self._ids[self._prefix:]
        done = self._tok.decode(window[: self._read - self._prefix], skip_special_tokens=self._skip)
        full = self._tok.decode(window, skip_special_tokens=self._skip)
        self._read = len(self._ids)
        return full[len(done):] if len(full) > len(done) else ""
