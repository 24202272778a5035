"""The tokenizer llguidance matches against, built from Conch's own TokenizerInfo.

llguidance's Hugging Face loader (`llguidance.hf.from_tokenizer`) reads tokenizer.json and treats every added
token as special, flagged so or not. Qwen's `<tool_call>` and `</tool_call>`, `<think>` and `</think>` are added
tokens that are not special: the model writes them as text, and a grammar spelling `"<tool_call>"` must accept
that one token. Through the loader the mask allowed the token and the matcher then refused it, so a forced call
was cut mid-generation. Here llguidance gets the bytes of every token (grammars/token_bytes.py: added tokens
are their literal text) and exactly the special ids TokenizerInfo names (the flagged ones), and tokenizes text
through the tokenizer itself.

Invariant: for every token that is not special, llguidance sees the bytes TokenizerInfo.token_bytes holds, so
it agrees with the other libraries (and the decoded text) on what each token spells.
"""

from __future__ import annotations

from typing import Any

from llguidance import LLTokenizer, TokenizerWrapper

from ..tokenizer import TokenizerInfo


class _Vocabulary:
    """The duck-typed tokenizer llguidance's TokenizerWrapper reads (its attributes and `__call__`)."""

    def __init__(self, info: TokenizerInfo) -> None:
        self.eos_token_id = info.eos_token_ids[0]
        self.bos_token_id = None
        self.tokens = list(info.token_bytes)
        self.special_token_ids = sorted(info.special_token_ids)
        self._hf = info.hf_tokenizer

    def __call__(self, text: Any) -> list[int]:
        if not isinstance(text, str):
            raise TypeError("text only")  # the wrapper probes with bytes once, then sends str
        return list(self._hf.encode(text, add_special_tokens=False))


def llguidance_tokenizer(info: TokenizerInfo) -> LLTokenizer:
    """llguidance's tokenizer for `info` (about a second: build once per tokenizer)."""
    return LLTokenizer(TokenizerWrapper(_Vocabulary(info)), n_vocab=info.vocab_size,
                       eos_token=list(info.eos_token_ids))
