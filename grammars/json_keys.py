"""The check beside a JSON grammar: no object repeats a key, and an open object's undeclared keys are bounded.

A grammar cannot remember which keys an open object already has, so a looping model would write
`"k":1,"k":1,...` until max_tokens, which no parser accepts. llguidance already generates each declared
property at most once, in order, and undeclared keys only after them, never equal to a declared one.
What is left is checked here, on the bytes of the accepted tokens:
- a key never completes (its closing quote) in an object that already holds it (raw bytes compared, so
  `"a"` and `"\\u0061"` count as two keys);
- an object holding `limit` keys that no `properties` of the schema declares takes no further `,`: a
  looping model must close it (every output of the grammar that closes it there is still valid);
- a key grows to at most `max_key_bytes` bytes (a looping model otherwise writes one endless key).
`restrict` clears the tokens that would break any of these from a mask row, unless that would leave the row
empty (a grammar that allows only a duplicate or a comma there keeps its row); `allows` agrees with it on
the first two (the key length is the mask's alone: `accept` may take more than the mask, never less).
Per token this costs a walk over the token's bytes, plus, inside an object with keys, a dry run of the
few tokens that hold two quotes (20 of SmolLM2's 49,152) and a prefix search of the sorted vocabulary.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
import torch

from .schema_walk import iter_nodes
from .tokenizer import TokenizerInfo

_QUOTE, _BACKSLASH, _COMMA = ord('"'), ord("\\"), ord(",")
_OPEN_OBJECT, _OPEN_ARRAY, _CLOSERS = ord("{"), ord("["), frozenset(b"}]")
_INERT = frozenset(b" \t\n\r:")                  # between tokens: whitespace, and the colon after a key
_LITERAL_END = frozenset(b" \t\n\r,}]:")          # what ends a number, true, false or null
_OUT, _STRING, _KEY, _LITERAL = range(4)          # where the next byte lands


class _Frame(NamedTuple):
    keys: frozenset[bytes] | None    # None: an array
    extra: int                       # keys no `properties` of the schema declares
    expect_key: bool                 # after `{` or `,`: the next string is a key


class _State(NamedTuple):
    stack: tuple[_Frame, ...]        # the open containers, outermost first
    mode: int
    escaped: bool                    # in a string, after a backslash
    key: bytes                       # the key so far (raw bytes between the quotes), in _KEY mode


_START = _State((), _OUT, False, b"")
_ARRAY = _Frame(None, 0, False)


@dataclass(frozen=True)
class KeyRules:
    """What the check needs from one schema: the names it declares, and the bound on the others."""
    declared: frozenset[bytes]       # every `properties` name, as its JSON string's raw bytes
    limit: int | None                # undeclared keys per object (GenerationBounds.max_extra_keys)
    max_key_bytes: int | None        # a key's raw bytes (max_string_length, or the longest declared name)

    @classmethod
    def for_schema(cls, schema: Any, limit: int | None, max_key_length: int | None) -> "KeyRules":
        names = {name for _, node in iter_nodes(schema) if isinstance(node.get("properties"), dict)
                 for name in node["properties"]}
        declared = frozenset(json.dumps(name, ensure_ascii=False)[1:-1].encode() for name in names)
        longest = max((len(name) for name in declared), default=0)
        return cls(declared, limit, None if max_key_length is None else max(max_key_length, longest))


class KeyVocabulary:
    """Per tokenizer: token bytes sorted for prefix search, and the ids a dry run must look at."""

    def __init__(self, info: TokenizerInfo) -> None:
        excluded = info.special_token_ids | frozenset(info.eos_token_ids)
        pairs = sorted((raw, i) for i, raw in enumerate(info.token_bytes) if raw and i not in excluded)
        self.token_bytes = info.token_bytes
        self.sorted_bytes = [raw for raw, _ in pairs]
        self.sorted_ids = np.array([i for _, i in pairs], dtype=np.int64)
        usable = [(i, raw) for i, raw in enumerate(info.token_bytes) if i not in excluded]
        self.quoted = np.array([i for i, raw in usable if raw.count(b'"') >= 2], dtype=np.int64)   # may hold a key
        self.commas = np.array([i for i, raw in usable if b"," in raw], dtype=np.int64)
        # (V,) the bytes a token adds to a key: up to its first quote, else all of it (0 for special tokens)
        self.key_growth = np.array([0 if i in excluded else raw.find(b'"') if b'"' in raw else len(raw)
                                    for i, raw in enumerate(info.token_bytes)], dtype=np.int64)

    def starting_with(self, prefix: bytes) -> np.ndarray:
        """Ids of the tokens whose bytes start with `prefix`."""
        start = bisect.bisect_left(self.sorted_bytes, prefix)
        end = start
        while end < len(self.sorted_bytes) and self.sorted_bytes[end].startswith(prefix):
            end += 1
        return self.sorted_ids[start:end]


@lru_cache(maxsize=8)
def key_vocabulary(info: TokenizerInfo) -> KeyVocabulary:
    return KeyVocabulary(info)


def _feed(state: _State, data: bytes, rules: KeyRules, strict: bool = True) -> _State | None:
    """The state after `data`; None if `data` repeats a key or passes an object's bound and `strict`."""
    stack, mode, escaped, key = list(state.stack), state.mode, state.escaped, bytearray(state.key)
    for byte in data:
        if mode in (_STRING, _KEY):
            if escaped or byte != _QUOTE:
                escaped = not escaped and byte == _BACKSLASH
                if mode == _KEY:
                    key.append(byte)
                continue
            if mode == _KEY:
                name, top = bytes(key), stack[-1]
                held = top.keys or frozenset()
                if name in held and strict:
                    return None
                stack[-1] = _Frame(held | {name}, top.extra + (name not in held and name not in rules.declared), False)
            mode = _OUT
            continue
        if mode == _LITERAL:
            if byte not in _LITERAL_END:
                continue
            mode = _OUT
        if byte == _QUOTE:
            in_key = bool(stack) and stack[-1].expect_key
            mode, key = (_KEY, bytearray()) if in_key else (_STRING, key)
        elif byte == _OPEN_OBJECT:
            stack.append(_Frame(frozenset(), 0, True))
        elif byte == _OPEN_ARRAY:
            stack.append(_ARRAY)
        elif byte in _CLOSERS:
            if stack:
                stack.pop()
        elif byte == _COMMA:
            top = stack[-1] if stack else _ARRAY
            if top.keys is not None:
                if strict and rules.limit is not None and top.extra >= rules.limit:
                    return None
                stack[-1] = top._replace(expect_key=True)
        elif byte not in _INERT:
            mode = _LITERAL
    return _State(tuple(stack), mode, escaped, bytes(key) if mode == _KEY else b"")


class KeyCheck:
    """One sequence's check; it follows the matcher's accepted non-EOS tokens (and their rollbacks)."""

    def __init__(self, vocabulary: KeyVocabulary, rules: KeyRules) -> None:
        self._vocab, self._rules = vocabulary, rules
        self._states = [_START]          # one more than the tokens accepted
        self._lenient = False            # the last mask kept the grammar's row (see the module docstring)

    def allows(self, token_id: int) -> bool:
        return self._lenient or _feed(self._states[-1], self._vocab.token_bytes[token_id], self._rules) is not None

    def accept(self, token_id: int) -> None:
        state = _feed(self._states[-1], self._vocab.token_bytes[token_id], self._rules, strict=False)
        assert state is not None
        self._states.append(state)
        self._lenient = False

    def rollback(self, num_tokens: int) -> None:
        del self._states[len(self._states) - num_tokens:]
        self._lenient = False

    def restrict(self, row: torch.Tensor) -> None:
        """Clear from `row` ((W,) int32, a view of the bitmask) every allowed token `allows` would refuse."""
        words = row.numpy()
        forbidden = self._forbidden(words)
        self._lenient = False
        if forbidden.size == 0:
            return
        kept = words.copy()
        cleared = np.zeros(words.size * 32, dtype=bool)
        cleared[forbidden] = True
        words &= ~np.packbits(cleared, bitorder="little").view(np.int32)
        if not words.any():
            words[:] = kept
            self._lenient = True

    def _forbidden(self, words: np.ndarray) -> np.ndarray:
        state = self._states[-1]
        found = [self._growing_a_key_too_long(state)]
        objects = [frame for frame in state.stack if frame.keys is not None]
        limit = self._rules.limit
        at_limit = limit is not None and any(frame.extra >= limit for frame in objects)
        if not at_limit and not any(frame.keys for frame in objects):
            return found[0]
        found.append(self._completing_a_held_key(state))
        candidates = np.concatenate([self._vocab.quoted, self._vocab.commas]) if at_limit else self._vocab.quoted
        allowed = candidates[(words[candidates >> 5] >> (candidates & 31)) & 1 == 1]
        found.append(np.array([i for i in allowed.tolist()
                               if _feed(state, self._vocab.token_bytes[i], self._rules) is None], dtype=np.int64))
        return np.concatenate(found)

    def _growing_a_key_too_long(self, state: _State) -> np.ndarray:
        """In a key: the tokens that would make it longer than `max_key_bytes` (an escaped quote counts as
        its end, so a key may pass the bound by one token's bytes)."""
        if state.mode != _KEY or self._rules.max_key_bytes is None:
            return np.empty(0, dtype=np.int64)
        left = max(self._rules.max_key_bytes - len(state.key), 0)   # past it (a lenient step), only closing
        return np.flatnonzero(self._vocab.key_growth > left)

    def _completing_a_held_key(self, state: _State) -> np.ndarray:
        """In a key: the tokens that close it as a key its object already holds."""
        if state.mode != _KEY or not state.stack or not state.stack[-1].keys:
            return np.empty(0, dtype=np.int64)
        held = state.stack[-1].keys or frozenset()
        rests = [name[len(state.key):] + b'"' for name in held if name.startswith(state.key)]
        return np.concatenate([self._vocab.starting_with(rest) for rest in rests] or [np.empty(0, dtype=np.int64)])
