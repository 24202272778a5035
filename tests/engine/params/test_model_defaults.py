"""A model's generation defaults fill what a request leaves out, never what it sends."""
from __future__ import annotations

from conch.engine.params import build_sampling
from conch.engine.params.model_defaults import GenerationDefaults
from conch.engine.types import SamplingParams


def test_defaults_fill_only_the_fields_a_request_left_out():
    params = build_sampling({"temperature": 1.0, "max_tokens": 5})
    assert "temperature" not in params.model_defaults and "top_k" in params.model_defaults
    got = GenerationDefaults(temperature=0.6, top_p=0.95, top_k=20).apply(params)
    assert (got.temperature, got.top_p, got.top_k, got.max_tokens) == (1.0, 0.95, 20, 5)
    assert got.model_defaults == frozenset()


def test_params_built_in_code_take_no_default():
    params = SamplingParams(temperature=1.0)
    assert GenerationDefaults(temperature=0.0).apply(params) is params


def test_a_default_of_the_wrong_type_or_out_of_range_is_dropped():
    got = GenerationDefaults.from_mapping({"temperature": 7.0, "top_p": "0.9", "top_k": 40, "min_p": True,
                                           "repetition_penalty": 1.1, "do_sample": True})
    assert got == GenerationDefaults(top_k=40, repetition_penalty=1.1)
