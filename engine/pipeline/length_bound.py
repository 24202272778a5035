"""A lower bound on a prompt's token count, without tokenizing it: the cheap refusal of a prompt that cannot
fit the context (a 4.8 MB prompt would otherwise be tokenized whole, seconds of CPU, before being refused).

Invariant (why the bound never refuses a prompt that fits): for a byte-level BPE tokenizer with no normalizer
(GPT-2, Llama 3, SmolLM2...), the text's UTF-8 bytes are exactly the concatenation of its tokens' bytes, minus
nothing: every byte belongs to some token. A vocabulary token spans at most `len(token string)` bytes (the
byte-level alphabet spells one byte per character), an added token spans its content, and a character is at
least one byte; so one token spans at most M = max(len(s) for s in the vocabulary) characters of the text and

    tokens(text) >= ceil(len(text) / M)

(special tokens the tokenizer adds only add to the count). A tokenizer that may drop or merge characters
before its model sees them (a normalizer, a pre-tokenizer that removes whitespace, SentencePiece's
whitespace handling, an added token that strips the whitespace beside it) gets no bound: its prompts are
tokenized whole, in a worker thread.
"""
from __future__ import annotations

import json
import weakref

# Pre-tokenizers that keep every byte of the text (a Split may remove the matches: only if it isolates them).
_LOSSLESS_SPLIT = frozenset({"Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"})
_spans: "weakref.WeakKeyDictionary[object, int | None]" = weakref.WeakKeyDictionary()


def at_least_tokens(tokenizer, text: str) -> int:
    """A number of tokens `text` has at least (0 where the tokenizer allows no cheap bound)."""
    span = max_token_span(tokenizer)
    return -(-len(text) // span) if span else 0


def max_token_span(tokenizer) -> int | None:
    """M above, or None; computed once per tokenizer (a pass over its vocabulary)."""
    try:
        return _spans[tokenizer]
    except KeyError:
        pass
    except TypeError:                         # not weak-referenceable: no cache, no bound
        return None
    span = _span(tokenizer)
    _spans[tokenizer] = span
    return span


def _span(tokenizer) -> int | None:
    """The parts the invariant needs, read from the backend one by one (its whole JSON would spell out the
    vocabulary and the merges: ~0.1 s of a 150k vocabulary's load)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    try:
        pre = backend.pre_tokenizer
        spec = None if pre is None else json.loads(pre.__getstate__())
        normalizer, added = backend.normalizer, backend.get_added_tokens_decoder().values()
    except (ValueError, AttributeError):
        return None
    if normalizer is not None or not _byte_level(spec):
        return None
    if any(t.lstrip or t.rstrip for t in added):
        return None                           # such a token swallows the whitespace beside it, unbounded
    return max(map(len, backend.get_vocab()), default=0) or None


def _byte_level(pre: dict | None) -> bool:
    """Whether the pre-tokenizer is ByteLevel, alone or after lossless splits."""
    if pre is None:
        return False
    if pre.get("type") == "ByteLevel":
        return True
    if pre.get("type") != "Sequence":
        return False
    parts = pre.get("pretokenizers") or []
    lossless = all(p.get("type") in ("ByteLevel", "Digits") or
                   (p.get("type") == "Split" and p.get("behavior") in _LOSSLESS_SPLIT) for p in parts)
    return lossless and any(p.get("type") == "ByteLevel" for p in parts)
