"""MAPPING TESTS, not backend tests: the pure functions that turn Conch's requests and configs into
TensorRT-LLM's arguments, and its outputs into Conch's deltas (engine/backends/tensorrt_llm/mapping.py,
outputs.py). TensorRT-LLM cannot be installed here (no CUDA); the backend itself runs in the conformance
suite on a GPU machine (scripts/gpu-check.sh). The output stand-ins below are plain data shaped as
TensorRT-LLM's CompletionOutput, the input of a pure function, not a fake backend."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from conch.engine.backends.tensorrt_llm.mapping import guided_kwargs, llm_kwargs, sampling_kwargs, to_trt_request
from conch.engine.backends.tensorrt_llm.outputs import aborted_delta, choice_delta, stats_from_iteration
from conch.engine.errors import InvalidRequest
from conch.engine.repository import ModelConfig
from conch.engine.types import GenerationRequest, RequestStatus, SamplingParams
from conch.grammars import Choice, Grammar, JsonObject, JsonSchema, Regex


def test_greedy_becomes_top_k_one_and_neutral_values_are_left_to_its_defaults():
    out = sampling_kwargs(SamplingParams(max_tokens=7, temperature=0.0))
    assert out == {"max_tokens": 7, "n": 1, "ignore_eos": False, "include_stop_str_in_output": False,
                   "detokenize": True, "top_k": 1}


def test_every_sampling_field_maps_one_to_one():
    p = SamplingParams(max_tokens=9, temperature=0.7, top_p=0.9, top_k=40, min_p=0.05, seed=-1,
                       presence_penalty=0.5, frequency_penalty=-0.5, repetition_penalty=1.2, stop=("\n\n",),
                       stop_token_ids=(2, 7), ignore_eos=True, n=3, logprobs=4, include_stop_str_in_output=True,
                       min_tokens=2)
    assert sampling_kwargs(p) == {
        "max_tokens": 9, "n": 3, "ignore_eos": True, "include_stop_str_in_output": True, "detokenize": True,
        "temperature": 0.7, "top_k": 40, "top_p": 0.9, "min_p": 0.05, "seed": 2**64 - 1,
        "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.2, "stop": ["\n\n"],
        "stop_token_ids": [2, 7], "min_tokens": 2, "logprobs": 4}


def test_logprobs_zero_asks_for_one_and_keeps_only_the_chosen_token():
    assert sampling_kwargs(SamplingParams(logprobs=0))["logprobs"] == 1
    request = to_trt_request(GenerationRequest("r", "m", prompt_token_ids=(1, 2), params=SamplingParams(logprobs=0)))
    assert request.top_logprobs == 0


def test_prompt_logprobs_and_unresolved_max_tokens_are_refused_naming_the_field():
    with pytest.raises(InvalidRequest) as info:
        sampling_kwargs(SamplingParams(prompt_logprobs=2))
    assert info.value.param == "prompt_logprobs"
    with pytest.raises(InvalidRequest) as info:
        sampling_kwargs(SamplingParams(max_tokens=None))
    assert info.value.param == "max_tokens"


def test_the_request_carries_token_ids_grammar_and_logit_bias():
    request = GenerationRequest("r", "m", prompt_token_ids=(5, 6, 7), grammar=Regex("[a-z]+"),
                                params=SamplingParams(logit_bias=((3, -100.0),)))
    trt = to_trt_request(request)
    assert trt.prompt_token_ids == (5, 6, 7) and trt.guided == {"regex": "[a-z]+"}
    assert trt.logit_bias == ((3, -100.0),) and trt.top_logprobs is None
    with pytest.raises(InvalidRequest):
        to_trt_request(GenerationRequest("r", "m", prompt="text"))     # not tokenized yet


@pytest.mark.parametrize("spec, expected", [
    (JsonSchema.from_dict({"type": "object", "properties": {"a": {"type": "integer"}}}),
     {"json": {"type": "object", "properties": {"a": {"type": "integer"}}}}),
    (JsonObject(), {"json_object": True}),
    (Regex(r"\d{3}"), {"regex": r"\d{3}"}),
    (Choice(("yes", "no (maybe)")), {"regex": r"(yes|no \(maybe\))"}),
])
def test_grammar_specs_map_to_guided_decoding_fields(spec, expected):
    assert guided_kwargs(spec) == expected


def test_a_lark_grammar_is_refused_naming_the_field():
    with pytest.raises(InvalidRequest, match="EBNF") as info:
        guided_kwargs(Grammar('start: "a"'))
    assert info.value.param == "grammar"


def test_llm_arguments_from_a_config_yaml_and_from_tritons_tensorrtllm_parameters():
    plain = ModelConfig(name="m", backend="tensorrt_llm", dtype="float16", context_length=4096, max_batch_size=8)
    assert llm_kwargs(plain, "/models/hf") == {"model": "/models/hf", "tokenizer": "/models/hf", "dtype": "float16",
                                               "max_batch_size": 8, "max_seq_len": 4096}
    triton = ModelConfig(name="m", backend="tensorrt_llm", parameters={
        "gpt_model_path": "/engines/m", "tokenizer_dir": "/tok", "kv_cache_free_gpu_mem_fraction": "0.5",
        "enable_kv_cache_reuse": "true", "max_tokens_in_paged_kv_cache": "8192",
        "engine_args": '{"max_num_tokens": 2048}'})
    out = llm_kwargs(triton, "/models/hf")
    assert out["model"] == "/engines/m" and out["tokenizer"] == "/tok" and out["max_num_tokens"] == 2048
    assert out["kv_cache_config"] == {"free_gpu_memory_fraction": 0.5, "enable_block_reuse": True, "max_tokens": 8192}
    with pytest.raises(InvalidRequest, match="engine_args"):
        llm_kwargs(ModelConfig(name="m", parameters={"engine_args": "[1"}), "/w")


@dataclass
class Logprob:                       # TensorRT-LLM's Logprob(logprob, rank): plain data
    logprob: float
    rank: int | None = None


@dataclass
class Output:                        # the attributes of TensorRT-LLM's CompletionOutput that outputs.py reads
    index: int
    token_ids: list[int]
    token_ids_diff: list[int]
    text_diff: str
    logprobs_diff: list[Any] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: int | str | None = None


def test_a_running_output_becomes_a_delta_with_its_new_tokens_and_top_logprobs():
    out = Output(1, [4, 5, 6], [5, 6], "ab", [{5: Logprob(-0.1), 9: Logprob(-2.0), 8: Logprob(-3.0)},
                                               {6: Logprob(-0.5), 2: Logprob(-0.4)}])
    delta = choice_delta("r", out, 10, 1, piece=lambda t: f"<{t}>")
    assert (delta.index, delta.token_ids, delta.text, delta.status, delta.usage) == \
        (1, (5, 6), "ab", RequestStatus.RUNNING, None)
    first, second = delta.logprobs
    assert first.chosen.token_id == 5 and first.chosen.token == "<5>" and first.chosen.logprob == -0.1
    assert [t.token_id for t in first.top] == [5] and [t.token_id for t in second.top] == [2]


@pytest.mark.parametrize("reason, status", [("stop", RequestStatus.FINISHED_STOPPED),
                                            ("length", RequestStatus.FINISHED_LENGTH),
                                            ("cancelled", RequestStatus.FINISHED_ABORTED)])
def test_a_finished_output_is_a_final_delta_with_usage(reason, status):
    out = Output(0, [1, 2, 3], [3], "c", finish_reason=reason, stop_reason="\n" if reason == "stop" else None)
    delta = choice_delta("r", out, 7, None, piece=str)
    assert delta.status == status and delta.usage.prompt_tokens == 7 and delta.usage.completion_tokens == 3
    assert delta.logprobs == () and delta.stop_reason == ("\n" if reason == "stop" else None)


def test_older_builds_float_logprobs_give_the_chosen_token_only():
    delta = choice_delta("r", Output(0, [3], [3], "x", [-0.25]), 1, 2, piece=str)
    assert delta.logprobs[0].chosen.logprob == -0.25 and delta.logprobs[0].top == ()


def test_a_choice_aborted_alone_ends_with_its_own_final_delta():
    delta = aborted_delta("r", 2, 5, 4)
    assert delta.index == 2 and delta.status == RequestStatus.FINISHED_ABORTED and delta.usage.total_tokens == 9


def test_iteration_stats_give_running_waiting_and_kv_blocks_in_use():
    stats = stats_from_iteration({"numActiveRequests": 3, "numQueuedRequests": 2,
                                  "kvCacheStats": {"usedNumBlocks": 25, "maxNumBlocks": 100}}, running=0)
    assert (stats.running, stats.waiting, stats.kv_cache_usage) == (3, 2, 0.25)
    unknown = stats_from_iteration({}, running=4)
    assert (unknown.running, unknown.waiting, unknown.kv_cache_usage) == (4, 0, None)
