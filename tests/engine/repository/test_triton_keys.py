"""Every top-level config.pbtxt key is honoured or refused at load by name: instance_group, response_cache and
model_warmup and a python model's sequence_batching and rate_limiter are read; optimization... are refused
with the reason."""
from __future__ import annotations

import numpy as np
import pytest

from conch.engine.errors import InvalidRequest
from conch.engine.repository.config import ModelConfig
from conch.engine.repository.pbtxt import parse_pbtxt, to_conch

PYTHON = 'backend: "python"\nmax_batch_size: 4\n'
LLM = 'backend: "transformers"\nparameters { key: "weights" value: { string_value: "builtin:tiny" } }\n'


def conch(text: str) -> ModelConfig:
    return to_conch(parse_pbtxt(text, "m"), "m", None, "1")


@pytest.mark.parametrize("extra, named", [
    ("sequence_batching { iterative_sequence: true }", "iterative_sequence"),
    ("optimization { input_pinned_memory { enable: true } }", "optimization"),
    ("metric_tags { key: 'a' value: 'b' }", "metric_tags"),
    ("batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: 'n' data_type: TYPE_FP32 } ]", "batch_input"),
    ("instance_group [ { count: 1 rate_limiter { priority: 2 } }, { count: 1 } ]", "same rate_limiter"),
    ("instance_group [ { count: 1 secondary_devices [ { device_id: 0 } ] } ]", "secondary_devices"),
    ("default_model_filename: 'model.savedmodel'", "default_model_filename"),
])
def test_unsupported_keys_are_refused_by_name(extra, named):
    with pytest.raises(InvalidRequest) as caught:
        conch(PYTHON + extra)
    assert named in caught.value.message


def test_instance_group_counts_add_up_for_python_and_are_refused_for_an_llm():
    config = conch(PYTHON + "instance_group [ { count: 2, kind: KIND_CPU }, { kind: KIND_CPU } ]")
    assert config.instance_count == 3
    assert conch(LLM + "instance_group [ { count: 1, kind: KIND_CPU } ]").instance_count == 1
    with pytest.raises(InvalidRequest, match="instance_group count 2 .*continuous batching"):
        conch(LLM + "instance_group [ { count: 2 } ]")
    with pytest.raises(InvalidRequest, match="instance_group count 2"):     # config.yaml's spelling too
        ModelConfig.from_mapping("m", {"weights": "builtin:tiny", "instance_count": 2})


def test_response_cache_is_off_unless_enabled_and_only_for_llms():
    assert conch(LLM).response_cache is False
    assert conch(LLM + "response_cache { enable: true }").response_cache is True
    assert ModelConfig("m").response_cache is True              # config.yaml keeps its default
    with pytest.raises(InvalidRequest, match="response_cache is supported for LLM models only"):
        conch(PYTHON + "response_cache { enable: true }")


def test_model_warmup_samples(tmp_path):
    config = conch(PYTHON + '''model_warmup [ {
        name: "s" batch_size: 2 count: 3
        inputs { key: "X" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } }
        inputs { key: "T" value: { data_type: TYPE_STRING dims: [ 1 ] input_data_file: "t.bin" } } } ]''')
    (sample,) = config.model_warmup
    assert (sample.name, sample.count) == ("s", 3)
    (tmp_path / "warmup").mkdir()
    (tmp_path / "warmup" / "t.bin").write_bytes(b"\x02\x00\x00\x00hi\x01\x00\x00\x00!")
    tensors = sample.tensors(batched=True, folder=tmp_path)
    assert tensors["X"].shape == (2, 4) and not tensors["X"].any()
    assert tensors["T"].tolist() == [[b"hi"], [b"!"]]
    with pytest.raises(InvalidRequest, match="exactly one of zero_data"):
        conch(PYTHON + 'model_warmup [ { name: "s" inputs { key: "X" value: { data_type: TYPE_FP32 dims: [1] '
                       '} } } ]')
    random = conch(PYTHON + 'model_warmup [ { name: "r" inputs { key: "X" value: { data_type: TYPE_INT32 '
                            'dims: [ 3 ] random_data: true } } } ]').model_warmup[0]
    assert random.tensors(batched=False, folder=None)["X"].dtype == np.int32


def test_sequence_batching_for_python_models_only():
    config = conch(PYTHON + '''sequence_batching { max_sequence_idle_microseconds: 2000000 oldest { }
        control_input [ { name: "S" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] },
                        { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING } ] } ]
        state [ { input_name: "I" output_name: "O" data_type: TYPE_FP32 dims: [ 2 ] } ] }''')
    rules = config.sequence_batching
    assert (rules.strategy, rules.idle_seconds) == ("oldest", 2.0)
    start, corrid = rules.controls
    assert start.tensor({"CONTROL_SEQUENCE_START": True}, 7, batched=True).tolist() == [[1.0]]
    assert corrid.tensor({}, "abc", batched=False).tolist() == [b"abc"]
    assert rules.states[0].initial(batched=True).shape == (1, 2)
    with pytest.raises(InvalidRequest, match="python models only"):
        conch(LLM + "sequence_batching { direct { } }")
    with pytest.raises(InvalidRequest, match="false and true values"):
        conch(PYTHON + 'sequence_batching { control_input [ { name: "S" control [ { kind: CONTROL_SEQUENCE_END } ] '
                       '} ] }')


def test_rate_limiter_for_python_models_only():
    config = conch(PYTHON + 'instance_group [ { count: 2 rate_limiter { resources [ { name: "R" count: 2 }, '
                            '{ name: "G" global: true count: 1 } ] priority: 3 } } ]')
    assert config.rate_limiter.resources == (("G", 1), ("R", 2)) and config.rate_limiter.priority == 3
    with pytest.raises(InvalidRequest, match="rate_limiter is supported for python models only"):
        conch(LLM + 'instance_group [ { rate_limiter { resources [ { name: "R" count: 1 } ] } } ]')
    with pytest.raises(InvalidRequest, match="config.pbtxt only"):
        ModelConfig.from_mapping("m", {"backend": "python", "rate_limiter": {"priority": 1}})
