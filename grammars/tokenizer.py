"""What the grammar libraries need to know about a tokenizer, built once per tokenizer."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Sequence

from .token_bytes import token_bytes


@dataclass(frozen=True, eq=False)
class TokenizerInfo:
    """A tokenizer as the grammar layer sees it. Equal (and hashed) by `fingerprint`.

    `vocab_size` is the width of a token mask (ids 0..vocab_size-1); a model whose logits are
    wider has its extra columns masked out always. EOS ids are allowed only where a grammar
    accepts; other special tokens are never allowed.
    """

    vocab_size: int
    eos_token_ids: tuple[int, ...]
    special_token_ids: frozenset[int]
    fingerprint: str
    hf_tokenizer: Any = field(repr=False)

    @classmethod
    def from_hf(
        cls, tokenizer: Any, *, vocab_size: int | None = None, eos_token_ids: Sequence[int] | None = None
    ) -> "TokenizerInfo":
        """From a transformers tokenizer (a fast one); EOS defaults to `tokenizer.eos_token_id`."""
        size = len(tokenizer) if vocab_size is None else vocab_size
        eos = tuple(eos_token_ids) if eos_token_ids is not None else (tokenizer.eos_token_id,)
        if not eos or any(not isinstance(i, int) or not 0 <= i < size for i in eos):
            raise ValueError(f"EOS token ids {eos!r} must be ids below the vocabulary size {size}")
        special = frozenset(i for i in _special_ids(tokenizer) if i < size)
        return cls(size, eos, special, _fingerprint(tokenizer, size, eos), tokenizer)

    @cached_property
    def token_bytes(self) -> tuple[bytes, ...]:
        """Raw bytes of every token id (b"" for unused ids); computed on first use."""
        return token_bytes(self.hf_tokenizer, self.vocab_size)

    @property
    def banned_token_ids(self) -> frozenset[int]:
        """Special tokens that no grammar may produce (all of them but EOS)."""
        return self.special_token_ids - frozenset(self.eos_token_ids)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TokenizerInfo) and other.fingerprint == self.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)


def _special_ids(tokenizer: Any) -> set[int]:
    """Named special tokens plus every added token flagged special (e.g. `<repo_name>`)."""
    added = getattr(tokenizer, "added_tokens_decoder", {})
    return set(tokenizer.all_special_ids) | {i for i, token in added.items() if getattr(token, "special", False)}


def _fingerprint(tokenizer: Any, vocab_size: int, eos: tuple[int, ...]) -> str:
    """A stable digest of everything that changes a mask: vocabulary, sizes, EOS, specials."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    payload = json.dumps([vocab_size, list(eos), sorted(_special_ids(tokenizer)), vocab], ensure_ascii=False)
    return "tok-" + hashlib.sha256(payload.encode()).hexdigest()[:24]
