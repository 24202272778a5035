"""The raw bytes each token id stands for, read from a Hugging Face tokenizer.

Libraries that index the vocabulary themselves (outlines-core) need bytes, not the tokenizer's
surface strings: byte-level BPE spells bytes as printable characters ("Ġ" is a space), and
SentencePiece spells a space "▁" and raw bytes "<0x0A>". Added tokens are literal text.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Callable

_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@lru_cache(maxsize=1)
def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's printable spelling of the 256 bytes, inverted: character -> byte."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


def _byte_level(token: str) -> bytes:
    alphabet = _byte_level_alphabet()
    return bytes(alphabet[char] for char in token) if all(c in alphabet for c in token) else token.encode()


def _sentencepiece(token: str) -> bytes:
    match = _BYTE_PIECE.match(token)
    return bytes([int(match.group(1), 16)]) if match else token.replace("\u2581", " ").encode()


def _decoder_kind(hf_tokenizer: Any) -> str:
    """'byte_level', 'sentencepiece' or 'other', from the fast tokenizer's decoder config."""
    backend = getattr(hf_tokenizer, "backend_tokenizer", None)
    if backend is None:
        return "other"
    text = json.dumps(json.loads(backend.to_str()).get("decoder"))
    if '"ByteLevel"' in text:
        return "byte_level"
    if '"ByteFallback"' in text or '"Metaspace"' in text or "\u2581" in text or "\\u2581" in text:
        return "sentencepiece"
    return "other"


def _decoder(hf_tokenizer: Any, kind: str) -> Callable[[str], bytes]:
    table: dict[str, Callable[[str], bytes]] = {"byte_level": _byte_level, "sentencepiece": _sentencepiece}
    if kind in table:
        return table[kind]
    return lambda token: hf_tokenizer.convert_tokens_to_string([token]).encode()


def token_bytes(hf_tokenizer: Any, vocab_size: int) -> tuple[bytes, ...]:
    """bytes[i] for every id i < vocab_size; b"" for ids the tokenizer does not define."""
    decode = _decoder(hf_tokenizer, _decoder_kind(hf_tokenizer))
    added = {i: t.content for i, t in getattr(hf_tokenizer, "added_tokens_decoder", {}).items()}
    out = [b""] * vocab_size
    for token, token_id in hf_tokenizer.get_vocab().items():
        if token_id < vocab_size:
            out[token_id] = added[token_id].encode() if token_id in added else decode(token)
    return tuple(out)
