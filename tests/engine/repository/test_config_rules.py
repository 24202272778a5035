"""Config keys with a range on both sides (the speculation keys): read as their type, refused by name outside
it, and the prompt lookup's bounds in order."""
from __future__ import annotations

import pytest

from conch.engine.errors import InvalidRequest
from conch.engine.repository.config import ModelConfig


def test_speculation_keys_are_read_as_their_types():
    c = ModelConfig.from_mapping("m", {"speculative_tokens": "8", "speculative_grammar": "false",
                                       "prompt_lookup_min": 3, "prompt_lookup_max": 5})
    assert (c.speculative_tokens, c.speculative_grammar, c.prompt_lookup_min, c.prompt_lookup_max) == (8, False, 3, 5)
    assert ModelConfig.from_mapping("m", {"speculative_tokens": 0}).speculative_tokens == 0     # off


@pytest.mark.parametrize(("key", "value", "why"), [
    ("speculative_tokens", 17, "at most 16"), ("speculative_tokens", -1, "at least 0"),
    ("prompt_lookup_min", 0, "at least 1"), ("speculative_max_batch", 0, "at least 1"),
    ("speculative_grammar", "maybe", "a boolean"),
])
def test_out_of_range_values_are_refused_by_name(key, value, why):
    with pytest.raises(InvalidRequest, match=f"'{key}' must be .*{why}") as e:
        ModelConfig.from_mapping("m", {key: value})
    assert e.value.param == key


def test_the_lookups_shortest_match_may_not_exceed_its_longest():
    with pytest.raises(InvalidRequest, match="'prompt_lookup_min' \\(5\\) must not exceed 'prompt_lookup_max'"):
        ModelConfig.from_mapping("m", {"prompt_lookup_min": 5})
