"""The vllm backend's pure parts, without vllm: engine args from a config (config.yaml keys and Triton's
model.json), Conch's SamplingParams and grammar specs -> vLLM's keyword arguments, and vLLM's DELTA outputs
-> GenerationDelta. With vllm installed, the kwargs are also fed to vLLM's own classes (they must accept them)."""
from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, fields
from types import SimpleNamespace

import pytest

from conch.engine.backends.vllm.args import engine_args, grammar_library
from conch.engine.backends.vllm.output import ChoiceStream, choice_id
from conch.engine.backends.vllm.sampling import sampling_kwargs, structured_outputs
from conch.engine.errors import BackendUnavailable, InvalidRequest
from conch.engine.repository.config import ModelConfig
from conch.engine.repository.pbtxt import parse_pbtxt, to_conch
from conch.engine.types import RequestStatus, SamplingParams
from conch.grammars.spec import Choice, Grammar, JsonObject, JsonSchema, Regex

HAS_VLLM = importlib.util.find_spec("vllm") is not None
FULL = SamplingParams(max_tokens=7, temperature=0.7, top_p=0.9, top_k=40, min_p=0.05, seed=11,
                      presence_penalty=0.5, frequency_penalty=-0.5, repetition_penalty=1.2,
                      logit_bias=((5, 10.0), (9, -100.0)), stop=("END", "\n\n"), stop_token_ids=(2, 3),
                      ignore_eos=True, n=3, logprobs=4, include_stop_str_in_output=True, min_tokens=2)


def builtin(name: str) -> str:
    return f"/models/{name}"


def test_every_conch_sampling_field_is_mapped_or_fanned_out():
    kwargs = sampling_kwargs(FULL, index=2)
    assert kwargs == {
        "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 13, "presence_penalty": 0.5,
        "frequency_penalty": -0.5, "repetition_penalty": 1.2, "logit_bias": {5: 10.0, 9: -100.0},
        "stop": ["END", "\n\n"], "stop_token_ids": [2, 3], "ignore_eos": True, "n": 1, "logprobs": 4,
        "include_stop_str_in_output": True, "min_tokens": 2, "max_tokens": 7, "skip_special_tokens": True}
    # n fans out; prompt_logprobs and speculative_tokens are not offered (capabilities); model_defaults is
    # read by Engine.prepare, which fills those fields before any backend sees the request
    handled = set(kwargs) | {"n", "prompt_logprobs", "speculative_tokens", "model_defaults"}
    assert {f.name for f in fields(SamplingParams)} <= handled


def test_defaults_and_seed_folding():
    kwargs = sampling_kwargs(SamplingParams())
    assert kwargs["top_k"] == 0 and kwargs["seed"] is None and kwargs["logit_bias"] is None and kwargs["stop"] == []
    # vLLM reads seed -1 as "no seed": the seed goes mod 2**64 (torch's own mapping), never -1
    for seed, index, expected in ((-1, 0, 2**64 - 1), (2**64 - 1, 1, 0), (-2**63, 0, 2**63), (5, 3, 8)):
        assert sampling_kwargs(SamplingParams(seed=seed), index)["seed"] == expected


@pytest.mark.parametrize("spec, expected", [
    (JsonSchema.from_dict({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
     {"json": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}),
    (JsonObject(), {"json_object": True}),
    (Regex(r"[0-9]{3}"), {"regex": r"[0-9]{3}"}),
    (Choice(("yes", "no")), {"choice": ["yes", "no"]}),
    (Grammar('start: "a" | "b"'), {"grammar": 'start: "a" | "b"'}),
])
def test_grammar_specs_map_onto_structured_outputs(spec, expected):
    assert structured_outputs(spec, "llguidance") == expected


def test_a_grammar_vllm_would_not_enforce_is_refused_up_front():
    # propertyNames is not enforced (grammars/schema_keywords.py): a 400 naming `grammar`, never ignored
    spec = JsonSchema.from_dict({"type": "object", "propertyNames": {"maxLength": 3}})
    with pytest.raises(InvalidRequest) as err:
        structured_outputs(spec, "llguidance")
    assert err.value.param == "grammar" and "propertyNames" in err.value.message


def test_engine_args_from_conch_keys():
    config = ModelConfig(name="m", backend="vllm", weights="builtin:smollm2", dtype="float32",
                         context_length=1024, max_batch_size=8)
    args = engine_args(config, builtin)
    assert args["model"] == "/models/smollm2" and args["dtype"] == "float32"
    assert args["max_model_len"] == 1024 and args["max_num_seqs"] == 8
    assert args["structured_outputs_config"] == {"backend": "guidance"} and grammar_library(args) == "llguidance"
    assert "enforce_eager" not in args and engine_args(config, builtin, cpu=True)["enforce_eager"] is True
    compiled = ModelConfig(name="m", backend="vllm", weights="/w", parameters={"engine_args": {"enforce_eager": False}})
    assert engine_args(compiled, builtin, cpu=True)["enforce_eager"] is False


def test_triton_layout_model_json_wins_and_relative_paths_resolve(tmp_path):
    (tmp_path / "v" / "1" / "weights").mkdir(parents=True)
    (tmp_path / "v" / "config.pbtxt").write_text('backend: "vllm"\nmax_batch_size: 0\n')
    (tmp_path / "v" / "1" / "model.json").write_text(json.dumps({
        "model": "weights", "max_model_len": 512, "dtype": "bfloat16", "enforce_eager": True,
        "structured_outputs_config": {"backend": "xgrammar"}}))
    message = parse_pbtxt((tmp_path / "v" / "config.pbtxt").read_text(), "v")
    config = to_conch(message, "v", str(tmp_path / "v"), "1")
    args = engine_args(config, builtin)
    assert args["model"] == str(tmp_path / "v" / "1" / "weights") and args["max_model_len"] == 512
    assert args["enforce_eager"] is True and args["dtype"] == "bfloat16" and grammar_library(args) == "xgrammar"
    hub = engine_args(ModelConfig(name="h", backend="vllm", parameters={"engine_args": {"model": "org/name"}},
                                  path=str(tmp_path / "v")), builtin)
    assert hub["model"] == "org/name"                      # not a local folder: a hub id, as Triton allows


def test_unknown_structured_outputs_backend_is_refused():
    config = ModelConfig(name="m", backend="vllm", weights="/w",
                         parameters={"engine_args": {"structured_outputs_config": {"backend": "auto"}}})
    with pytest.raises(BackendUnavailable, match="guidance"):
        engine_args(config, builtin)


@dataclass
class Lp:
    logprob: float
    rank: int | None
    decoded_token: str | None


def out(text, ids, logprobs=None, finish=None, stop=None):
    return SimpleNamespace(text=text, token_ids=ids, logprobs=logprobs, finish_reason=finish, stop_reason=stop)


def test_delta_outputs_become_generation_deltas():
    stream = ChoiceStream("r", 1, prompt_tokens=5, top_k=1)
    lps = [{7: Lp(-0.1, 1, "a"), 8: Lp(-2.0, 2, "b")}, {9: Lp(-3.0, 4, "c"), 8: Lp(-0.2, 1, "b")}]
    first = stream.delta(out("ab", [7, 9], lps))
    assert first.status is RequestStatus.RUNNING and first.text == "ab" and first.usage is None
    assert [p.chosen.token_id for p in first.logprobs] == [7, 9]
    assert [[t.token_id for t in p.top] for p in first.logprobs] == [[7], [8]]   # rank <= k, rank order
    last = stream.delta(out("", [2], [{2: Lp(-0.5, 1, "</s>")}], finish="stop", stop=2))
    assert last.finish_reason == "stop" and last.stop_reason == 2
    assert last.usage.prompt_tokens == 5 and last.usage.completion_tokens == 3 and last.index == 1
    assert ChoiceStream("r", 0, 2).delta(out("x", [1], finish="abort")).finish_reason == "abort"
    assert ChoiceStream("r", 0, 2).delta(out("x", [1], finish="length")).finish_reason == "length"
    assert ChoiceStream("r", 0, 2).ended_without_finish().finish_reason == "abort"
    assert choice_id("abc", 2) == "abc#2"


@pytest.mark.skipif(not HAS_VLLM, reason="vllm is not installed (make vllm-venv)")
def test_vllm_accepts_the_kwargs():
    from vllm import SamplingParams as VSP
    from vllm.sampling_params import StructuredOutputsParams

    made = VSP(**sampling_kwargs(FULL, 1))
    assert made.seed == 12 and made.top_k == 40 and made.logit_bias == {5: 10.0, 9: -100.0} and made.n == 1
    StructuredOutputsParams(**structured_outputs(Choice(("a", "b")), "llguidance"))


def test_stats_record_keeps_gauges_and_sums_prefix_counters():
    from conch.engine.backends.vllm.stats import StatsRecord

    def sched(running, waiting, usage, queries, hits, reset=False):
        cache = SimpleNamespace(queries=queries, hits=hits, reset=reset)
        return SimpleNamespace(num_running_reqs=running, num_waiting_reqs=waiting, num_skipped_waiting_reqs=1,
                               kv_cache_usage=usage, prefix_cache_stats=cache)

    record = StatsRecord()
    record.update(sched(3, 2, 0.25, 100, 40))
    record.update(None)                                   # an update without scheduler stats changes nothing
    record.update(sched(1, 0, 0.5, 50, 10))
    assert (record.current.running, record.current.waiting, record.current.kv_cache_usage) == (1, 1, 0.5)
    assert (record.current.prefix_cache_queries, record.current.prefix_cache_hits) == (150, 50)
    record.update(sched(0, 0, 0.0, 7, 7, reset=True))
    assert (record.current.prefix_cache_queries, record.current.prefix_cache_hits) == (7, 7)
