"""The openai backend's config keys: parsed once into UpstreamConfig, bad values refused naming the model."""
from __future__ import annotations

import pytest

from conch.engine.errors import InvalidRequest
from conch.engine.repository.config import ModelConfig


def test_base_url_and_defaults():
    c = ModelConfig.from_mapping("remote", {"backend": "openai", "base_url": "http://h/v1", "api_key_env": "K",
                                            "timeout": 5, "max_concurrency": 8})
    assert c.is_llm and c.max_batch_size == 8
    assert c.upstream.upstream_model == "remote" and c.upstream.api_key_env == "K" and c.upstream.timeout == 5
    assert [r.base_url for r in c.upstream.routes] == ["http://h/v1"]


def test_routes_weights_fallbacks():
    c = ModelConfig.from_mapping("m", {"backend": "openai", "upstream_model": "u", "fallbacks": ["other"],
                                       "routes": [{"base_url": "http://a/v1", "weight": 2, "name": "a"},
                                                  {"base_url": "http://b/v1"}]})
    assert [(r.label, r.weight) for r in c.upstream.routes] == [("a", 2), ("http://b/v1", 1.0)]
    assert c.upstream.fallbacks == ("other",) and c.max_batch_size == 64


@pytest.mark.parametrize("data, words", [
    ({}, "exactly one of base_url or routes"),
    ({"base_url": "http://a/v1", "routes": [{"base_url": "http://b/v1"}]}, "exactly one of base_url or routes"),
    ({"routes": []}, "non-empty list"),
    ({"routes": [{"base_url": "http://a/v1", "weight": 0}]}, "weight must be > 0"),
    ({"routes": [{"url": "http://a/v1"}]}, "routes[0]"),
    ({"base_url": "http://a/v1", "api_key": "sk-secret"}, "unknown config keys ['api_key']"),
    ({"base_url": "http://a/v1", "encoding": "gpt2"}, "encoding must be one of"),
    ({"base_url": "http://a/v1", "timeout": 0}, "timeout must be > 0"),
])
def test_bad_upstream_config(data, words):
    with pytest.raises(InvalidRequest) as e:
        ModelConfig.from_mapping("m", {"backend": "openai", **data})
    assert words in e.value.message and "'m'" in e.value.message


def test_upstream_keys_are_unknown_to_other_backends():
    with pytest.raises(InvalidRequest, match="unknown config keys"):
        ModelConfig.from_mapping("m", {"backend": "transformers", "base_url": "http://a/v1"})
