"""grammars/tokenizer.py and token_bytes.py against SmolLM2's real tokenizer."""

from __future__ import annotations

import llguidance.hf
import pytest

from conch.grammars import TokenizerInfo


def test_smollm2_facts(info):
    assert info.vocab_size == 49152
    assert info.eos_token_ids == (2,)
    assert {0, 1, 2} <= info.special_token_ids
    assert 2 not in info.banned_token_ids and 0 in info.banned_token_ids


def test_fingerprint_is_stable_and_depends_on_what_changes_masks(hf_tokenizer, info):
    again = TokenizerInfo.from_hf(hf_tokenizer)
    assert again.fingerprint == info.fingerprint and again == info and hash(again) == hash(info)
    assert TokenizerInfo.from_hf(hf_tokenizer, vocab_size=49216).fingerprint != info.fingerprint
    assert TokenizerInfo.from_hf(hf_tokenizer, eos_token_ids=[0, 2]).fingerprint != info.fingerprint


def test_bad_eos_is_refused(hf_tokenizer):
    with pytest.raises(ValueError):
        TokenizerInfo.from_hf(hf_tokenizer, eos_token_ids=[49152])


def test_token_bytes_match_llguidance_decoding(hf_tokenizer, info):
    reference = llguidance.hf.from_tokenizer(hf_tokenizer)
    mismatched = [i for i in range(info.vocab_size) if reference.decode_bytes([i]) != info.token_bytes[i]]
    assert mismatched == []
    assert info.token_bytes[hf_tokenizer.convert_tokens_to_ids("Ġthe")] == b" the"
