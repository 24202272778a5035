"""config.pbtxt into tritonclient's ModelConfig and Conch's config; version policies; the vLLM layout."""
from __future__ import annotations

import json

import pytest
from tritonclient.grpc import model_config_pb2

from conch.engine.errors import InvalidRequest, ModelNotFound
from conch.engine.repository import ModelRepository
from conch.engine.repository.pbtxt import parse_pbtxt
from conch.engine.repository.specs import VersionPolicy
from conch.engine.tensors.triton_config import to_triton

PBTXT = '''
name: "m"
backend: "transformers"
max_batch_size: 8
version_policy: { latest: { num_versions: 2 } }
parameters { key: "weights" value: { string_value: "builtin:tiny" } }
parameters { key: "context_length" value: { string_value: "512" } }
parameters { key: "custom" value: { string_value: "kept" } }
'''


def test_pbtxt_parses_into_triton_message_and_conch_config(tmp_path):
    for v in (1, 2, 3):
        (tmp_path / "m" / str(v)).mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text(PBTXT)
    repo = ModelRepository(tmp_path)
    config = repo.config("m")
    assert isinstance(config.triton, model_config_pb2.ModelConfig)
    assert (config.backend, config.weights, config.context_length, config.max_batch_size) == \
        ("conch", "builtin:tiny", 512, 8)   # "transformers", the own engine's former name, is read as it
    assert config.parameters == {"custom": "kept"} and config.version == "3"
    assert repo.versions("m") == ["2", "3"]
    assert to_triton(config) is config.triton


def test_version_policies():
    assert VersionPolicy().select([1, 3, 2]) == [3]
    assert VersionPolicy.from_mapping({"all": {}}).select([2, 1]) == [1, 2]
    assert VersionPolicy.from_mapping({"specific": {"versions": [1, "3"]}}).select([1, 2, 3]) == [1, 3]
    assert VersionPolicy.from_mapping({"latest": {"num_versions": 2}}).select([1, 2, 3]) == [2, 3]


def test_vllm_layout_is_read(tmp_path):
    (tmp_path / "v" / "1").mkdir(parents=True)
    (tmp_path / "v" / "config.pbtxt").write_text('backend: "vllm"\n')
    (tmp_path / "v" / "1" / "model.json").write_text(json.dumps({"model": "x", "gpu_memory_utilization": 0.5}))
    config = ModelRepository(tmp_path).config("v")
    assert config.backend == "vllm" and config.name == "v"
    assert config.parameters["engine_args"] == {"model": "x", "gpu_memory_utilization": 0.5}


def test_yaml_config_becomes_a_triton_message(tmp_path):
    (tmp_path / "t" / "1").mkdir(parents=True)
    (tmp_path / "t" / "config.yaml").write_text("weights: builtin:tiny\n")
    message = to_triton(ModelRepository(tmp_path).config("t"))
    assert message.name == "t" and message.input[0].name == "text_input"
    assert message.input[0].data_type == model_config_pb2.TYPE_STRING


@pytest.mark.parametrize("text, words", [("name: ", "does not parse"), ("name: \"x\"\n", "neither a backend")])
def test_bad_pbtxt(tmp_path, text, words):
    (tmp_path / "b" / "1").mkdir(parents=True)
    (tmp_path / "b" / "config.pbtxt").write_text(text)
    with pytest.raises(InvalidRequest, match=words):
        ModelRepository(tmp_path).config("b")


def test_unknown_and_unsafe_names(tmp_path):
    for name in ("nope", "../etc", ".hidden"):
        with pytest.raises(ModelNotFound):
            ModelRepository(tmp_path).config(name)


def test_parse_keeps_name():
    assert parse_pbtxt('backend: "python"', "fallback").name == "fallback"
