"""Each config key is declared once (its `ModelConfig` field names its rule and sources): every key that may be
written as a config.pbtxt `parameters` entry round-trips through one, and every key a load override may write
round-trips through an override, read back as its type."""
from __future__ import annotations

import json

import pytest

from conch.engine.errors import InvalidRequest
from conch.engine.repository.config import OVERRIDE_KEYS, PARAMETER_KEYS, RULES, ModelConfig
from conch.engine.repository.repository import ModelRepository
from conch.engine.tensors.triton_config import to_triton
from conch.grammars import GenerationBounds

# A value other than the default for every key a source may write: (as written, as read). A new key without
# a sample fails test_every_key_has_a_sample.
SAMPLES = {
    "backend": ("python", "python"), "weights": ("w", "w"), "tokenizer": ("t", "t"), "mmproj": ("p.gguf", "p.gguf"),
    "chat_template": ("{{ messages }}", "{{ messages }}"), "tool_call_parser": ("pythonic", "pythonic"),
    "max_parallel_tool_calls": ("7", 7), "max_batch_size": ("9", 9), "context_length": ("512", 512),
    "dtype": ("float32", "float32"), "max_queue_size": ("0", 0), "prefix_cache_mb": ("0", 0),
    "kv_cache_mb": ("64", 64), "runner": ("hf", "hf"), "kv_store": ("zeroed", "zeroed"),
    "max_step_tokens": ("256", 256), "batch_invariant": ("true", True), "prefill_stall": ("0", 0.0),
    "speculative_tokens": ("8", 8), "prompt_lookup_min": ("3", 3), "prompt_lookup_max": ("6", 6),
    "speculative_grammar": ("false", False), "speculative_max_batch": ("2", 2), "queue_timeout": ("1.5", 1.5),
    "response_cache": ("false", False), "num_threads": ("2", 2), "decoupled": ("true", True),
    "instance_count": (1, 1), "parameters": ({"a": "b"}, {"a": "b"}),
    "grammar_bounds": ({"max_items": 3}, GenerationBounds(max_items=3)),
}
STRUCTURED = {"inputs", "outputs", "steps", "version_policy", "dynamic_batching", "model_warmup"}   # own tests


def _backend_for(key: str) -> str:
    return "python" if key == "backend" else "transformers"


def test_every_key_has_a_sample():
    assert set(SAMPLES) | STRUCTURED >= PARAMETER_KEYS | OVERRIDE_KEYS
    assert PARAMETER_KEYS <= set(RULES)                 # a parameters entry is text: a rule reads it
    assert {"speculative_tokens", "prompt_lookup_min", "prompt_lookup_max", "speculative_grammar",
            "speculative_max_batch"} <= PARAMETER_KEYS


@pytest.mark.parametrize("key", sorted(PARAMETER_KEYS))
def test_a_parameters_entry_is_read_as_its_type(tmp_path, key):
    written, read = SAMPLES[key]
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text(
        f'backend: "transformers"\nparameters {{ key: "{key}" value {{ string_value: {json.dumps(written)} }} }}\n')
    config = ModelRepository(tmp_path).config("m")
    assert getattr(config, key) == read
    assert key not in config.parameters                 # honoured as the key, not left for a backend
    assert to_triton(ModelConfig.from_mapping("m", {key: written})).parameters[key].string_value == str(read)


@pytest.mark.parametrize("key", sorted(OVERRIDE_KEYS - STRUCTURED))
def test_a_load_override_is_read_as_its_type(tmp_path, key):
    written, read = SAMPLES[key]
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.yaml").write_text("backend: transformers\n")
    override = {"backend": _backend_for(key), key: written}
    if key in ("weights", "tokenizer"):                 # an override reads folders inside the repository only
        (tmp_path / "m" / "1" / written).mkdir()
    if key == "mmproj":                                 # and an mmproj .gguf file there
        (tmp_path / "m" / "1" / written).write_bytes(b"GGUF")
    config = ModelRepository(tmp_path).config("m", override=json.dumps(override))
    assert getattr(config, key) == read


@pytest.mark.parametrize("key", ["version", "path", "name", "triton", "upstream"])
def test_keys_no_source_writes_are_refused_in_yaml(tmp_path, key):
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.yaml").write_text(f"{key}: x\n")
    with pytest.raises(InvalidRequest, match=f"unknown config keys \\['{key}'\\]"):
        ModelRepository(tmp_path).config("m")


def test_a_triton_only_key_in_yaml_is_refused_by_name():
    with pytest.raises(InvalidRequest, match="sequence_batching is read from config.pbtxt only"):
        ModelConfig.from_mapping("m", {"sequence_batching": {}})
