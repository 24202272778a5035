"""One sequence's walk through a compiled grammar: fill its mask row, accept the sampled token.

The EOS rules live here, once, so that every library behaves the same:
- EOS is in the mask exactly where the grammar accepts what was produced so far;
- accepting EOS finishes the matcher, and nothing is accepted after it;
- special tokens other than EOS are never in the mask and never accepted;
- a refused token (`accept` -> False) leaves the state as it was;
- `rollback(n)` undoes the last n accepted tokens, EOS included.
A library adapter implements the five `_` primitives over non-EOS tokens only, so a library's
own EOS handling (outlines-core raises on EOS in a final state) is never reached.
A JSON schema's matcher also carries the key check (json_keys.py): the mask and `accept` refuse a key
its object already holds, and a `,` past an open object's bound on undeclared keys.
A matcher belongs to one sequence and is not shared between threads.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from .bitmask import check_bitmask, set_tokens
from .json_keys import KeyCheck
from .tokenizer import TokenizerInfo


class Matcher(ABC):
    def __init__(self, tokenizer: TokenizerInfo, keep_row: torch.Tensor) -> None:
        self._eos_ids = tokenizer.eos_token_ids
        self._eos = frozenset(tokenizer.eos_token_ids)
        self._banned = tokenizer.banned_token_ids
        self._vocab_size = tokenizer.vocab_size
        self._keep = keep_row  # (W,) int32: the vocabulary minus special tokens and EOS
        self._history: list[int] = []  # accepted token ids; EOS, if there, is last
        self._ended = False  # EOS accepted
        self._keys: KeyCheck | None = None  # follows the non-EOS tokens of a JSON output

    def checking_keys(self, check: KeyCheck) -> "Matcher":
        """This matcher, with `check` beside its grammar (before the first token)."""
        self._keys = check
        return self

    # -- what each library provides (non-EOS tokens only) --------------------------------------
    @abstractmethod
    def _fill(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the grammar's allowed tokens into bitmask[row]; EOS and special bits may be anything."""

    @abstractmethod
    def _advance(self, token_id: int) -> bool:
        """Accept one non-EOS token; on False the state is unchanged."""

    @abstractmethod
    def _accepting(self) -> bool:
        """Whether the output so far is a complete sentence of the grammar."""

    @abstractmethod
    def _stopped(self) -> bool:
        """Whether no token but EOS can follow."""

    @abstractmethod
    def _undo(self, num_tokens: int) -> None:
        """Roll back the last `num_tokens` non-EOS tokens."""

    def _failure(self) -> str | None:
        """The library's reason if it has given up on this grammar (a parser limit reached); None if not."""
        return None

    def _forced(self) -> list[int]:
        """Tokens the grammar forces next, as the library tokenizes the forced text; [] if it cannot say."""
        return []

    # -- the interface the sampler uses ----------------------------------------------------------
    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the tokens allowed next into bitmask[row] ((B, W) int32 on CPU)."""
        check_bitmask(bitmask, self._keep.numel())
        if self.is_finished():  # only EOS, so a sampler that samples anyway ends the sequence
            bitmask[row].zero_()
            set_tokens(bitmask, row, self._eos_ids, allowed=True)
            return
        self._fill(bitmask, row)
        bitmask[row] &= self._keep
        if self._accepting():
            set_tokens(bitmask, row, self._eos_ids, allowed=True)
        if self._keys is not None:
            self._keys.restrict(bitmask[row])

    def accept(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) if the grammar does not allow it here."""
        if self._ended or token_id in self._banned or not 0 <= token_id < self._vocab_size:
            return False
        if token_id in self._eos:
            if not self._accepting():
                return False
            self._ended = True
        elif (self._keys is not None and not self._keys.allows(token_id)) or not self._advance(token_id):
            return False
        elif self._keys is not None:
            self._keys.accept(token_id)
        self._history.append(token_id)
        return True

    def forced_tokens(self) -> list[int]:
        """Tokens the grammar forces next (possibly fewer than it forces: a library may hold back a last token
        that the text after it could merge with); a hint, not a mask: the library's tokenization of the forced
        text, which another tokenization of it may also spell."""
        return [] if self.is_finished() else self._forced()

    def failure(self) -> str | None:
        """Why the library cannot go on with this grammar (its limits: llguidance's items per row, lexer fuel),
        or None; the compiler's probe (compiler.py) turns it into a GrammarError before generation."""
        return self._failure()

    def is_finished(self) -> bool:
        """EOS was accepted, or the grammar allows nothing but EOS (the output is complete)."""
        return self._ended or self._stopped()

    def can_finish(self) -> bool:
        """Whether EOS is allowed now."""
        return not self._ended and self._accepting()

    is_accepting = can_finish

    def rollback(self, num_tokens: int) -> None:
        """Undo the last `num_tokens` accepted tokens (0 <= num_tokens <= num_tokens accepted)."""
        if not 0 <= num_tokens <= len(self._history):
            raise ValueError(f"cannot roll back {num_tokens} of {len(self._history)} accepted tokens")
        if num_tokens == 0:
            return
        del self._history[-num_tokens:]
        if self._ended:
            self._ended, num_tokens = False, num_tokens - 1
        if num_tokens:
            self._undo(num_tokens)
            if self._keys is not None:
                self._keys.rollback(num_tokens)

    @property
    def num_tokens(self) -> int:
        return len(self._history)

    @property
    def tokens(self) -> tuple[int, ...]:
        return tuple(self._history)
