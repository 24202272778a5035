"""Incremental detokenization: text grows token by token and never ends inside a UTF-8 character.

Invariant: `tokens[prefix:read]` decodes to text already emitted; text past it is emitted once it no longer
ends in the replacement character U+FFFD. With a `tokenizers` (Rust) tokenizer that does no clean-up of
spaces, a `DecodeStream` makes each token one Rust call (vLLM's fast detokenizer does the same: 1.1 us a
token here); any other tokenizer decodes the window `tokens[prefix:]` twice a token (7.6 us), on the event
loop's thread. Either way an id the tokenizer lacks (a padded vocabulary) adds no text.
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence

from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream


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
        raw: Any = getattr(tokenizer, "backend_tokenizer", None)
        self._stream: tuple[DecodeStream, Tokenizer] | None = None
        if isinstance(raw, Tokenizer) and not getattr(tokenizer, "clean_up_tokenization_spaces", False):
            self._stream = DecodeStream(skip_special_tokens=skip_special_tokens), raw

    def add(self, token_id: int) -> str:
        """Append one token; return the newly completed text (possibly empty)."""
        self._ids.append(token_id)
        if self._stream is not None:
            stream, raw = self._stream
            new = stream.step(raw, token_id)            # None until the text grows by whole characters
            if new:
                self._emitted()
            return new or ""
        window = self._ids[self._prefix:]
        done = self._tok.decode(window[: self._read - self._prefix], skip_special_tokens=self._skip)
        full = self._tok.decode(window, skip_special_tokens=self._skip)
        if full.endswith("\ufffd") or len(full) <= len(done):
            return ""
        self._emitted()
        return full[len(done):]

    def _emitted(self) -> None:
        self._read = len(self._ids)
        self._prefix = max(0, self._read - _WINDOW)

    def flush(self) -> str:
        """Text held back at the end (an incomplete character is emitted as U+FFFD)."""
        window = self._ids[self._prefix:]
        done = self._tok.decode(window[: self._read - self._prefix], skip_special_tokens=self._skip)
        full = self._tok.decode(window, skip_special_tokens=self._skip)
        self._read = len(self._ids)
        return full[len(done):] if len(full) > len(done) else ""
