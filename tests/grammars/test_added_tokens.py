"""An added token that is not special (Qwen's single `<tool_call>` token) is text to every grammar library: a
grammar that spells it accepts the token the model writes, as every library's mask already offers it.

The tokenizer is SmolLM2's with `<tool_call>` and `</tool_call>` added as non-special tokens (as Qwen2.5/Qwen3
ship them), plus one special token that stays banned."""

from __future__ import annotations

import copy
from functools import lru_cache

import pytest
from tokenizers import AddedToken

from conch.grammars import GrammarCompiler, Regex, TokenizerInfo, allocate_bitmask
from conch.grammars.bitmask import allowed_tokens

from .conftest import LIBRARIES, load_tokenizer

CALL = Regex(r'<tool_call>\n\{"a": [0-9]\}\n</tool_call>')   # a Regex: every library takes one


@lru_cache(maxsize=None)
def qwen_like():
    tokenizer = copy.deepcopy(load_tokenizer())
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in ("<tool_call>", "</tool_call>")])
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|box|>"]})
    return tokenizer


@lru_cache(maxsize=None)
def qwen_compiler(library: str) -> GrammarCompiler:
    return GrammarCompiler(TokenizerInfo.from_hf(qwen_like()), library)


@pytest.mark.parametrize("library", LIBRARIES)
def test_the_added_token_is_allowed_and_accepted(library):
    tokenizer, compiler = qwen_like(), qwen_compiler(library)
    ids = tokenizer.encode('<tool_call>\n{"a": 1}\n</tool_call>', add_special_tokens=False)
    open_id, close_id = (tokenizer.convert_tokens_to_ids(t) for t in ("<tool_call>", "</tool_call>"))
    assert ids[0] == open_id and ids[-1] == close_id   # one token each, as the model writes them
    matcher = compiler.compile(CALL).matcher()
    for token in ids:
        bitmask = allocate_bitmask(1, compiler.tokenizer_info.vocab_size)
        matcher.fill_bitmask(bitmask, 0)
        assert token in set(allowed_tokens(bitmask, 0).tolist())
        assert matcher.accept(token), tokenizer.decode([token])
    assert matcher.is_finished()


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_special_added_token_stays_banned(library):
    tokenizer, compiler = qwen_like(), qwen_compiler(library)
    box = tokenizer.convert_tokens_to_ids("<|box|>")
    assert box in compiler.tokenizer_info.banned_token_ids
    matcher = compiler.compile(Regex('[a-z<|>]+')).matcher()
    bitmask = allocate_bitmask(1, compiler.tokenizer_info.vocab_size)
    matcher.fill_bitmask(bitmask, 0)
    assert box not in set(allowed_tokens(bitmask, 0).tolist()) and not matcher.accept(box)
