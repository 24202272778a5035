"""The cheap prompt length bound never exceeds the real token count (so it never refuses a prompt that fits),
refuses a huge prompt, and is withheld from a tokenizer that may drop characters."""
from __future__ import annotations

import pytest
from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from conch.engine.weights.tiny import ensure_tiny_model
from conch.engine.pipeline.length_bound import at_least_tokens, max_token_span


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(ensure_tiny_model())       # SmolLM2's byte-level BPE


TEXTS = [" " * 5000, "\n" * 3000, "=" * 4000, "<|im_start|>" * 500, "<|im_start|>user\nhi<|im_end|>" * 100,
         "é" * 3000, "日本語のテキスト" * 400, "🙂" * 1000, "a" * 10000, "The quick brown fox. " * 500,
         "\t \n" * 2000, "0123456789" * 800, "".join(chr(c) for c in range(32, 3000))]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_the_bound_never_exceeds_the_token_count(tokenizer, text):
    assert 0 < at_least_tokens(tokenizer, text) <= len(tokenizer.encode(text, add_special_tokens=False))


def test_a_huge_prompt_is_bounded_past_the_context(tokenizer):
    assert at_least_tokens(tokenizer, "lorem ipsum " * 400_000) > 2048


def test_a_tokenizer_that_drops_whitespace_gets_no_bound():
    raw = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()                  # "a" + a million spaces is one token
    lossy = PreTrainedTokenizerFast(tokenizer_object=raw)
    assert max_token_span(lossy) is None and at_least_tokens(lossy, "a" + " " * 10**6) == 0


def _byte_level_copy(tokenizer) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(tokenizer.backend_tokenizer.to_str()))


def test_the_span_is_the_longest_token_of_a_byte_level_vocabulary(tokenizer):
    assert max_token_span(_byte_level_copy(tokenizer)) == max(map(len, tokenizer.get_vocab()))


def test_a_normalizer_or_a_stripping_added_token_gets_no_bound(tokenizer):
    normalized = _byte_level_copy(tokenizer)
    normalized.backend_tokenizer.normalizer = normalizers.Strip()
    stripping = _byte_level_copy(tokenizer)
    stripping.add_tokens([AddedToken("<tool>", lstrip=True)])
    assert max_token_span(_byte_level_copy(tokenizer)) is not None
    assert max_token_span(normalized) is None and max_token_span(stripping) is None
