"""The parameter table and its builder: every row in range, out of range, of the wrong type, given as text
(the tensor faces' way), and under its alias; the check Engine.prepare runs; the table's defaults."""
from __future__ import annotations

from dataclasses import fields

import pytest

from conch.engine.errors import InvalidRequest
from conch.engine.params import PARAMS, TENSOR_NAMES, build_sampling, checked_sampling
from conch.engine.params.table import BY_NAME
from conch.engine.types import SamplingParams

# name -> (a value in range and what it becomes, values out of range, values of the wrong type)
CASES = {
    "max_tokens": ((5, 5), [-1, 2**31], ["x", 1.5, True, [1]]),
    "min_tokens": ((2, 2), [-1, 2**31], ["x", 0.5, False]),
    "temperature": ((0.7, 0.7), [-0.1, 2.01, 100.0, float("inf"), float("nan")], ["hot", True, [1]]),
    "top_p": ((0.5, 0.5), [0.0, -0.1, 1.01], ["x", [0.5]]),
    "top_k": ((40, 40), [-2], ["x", 1.5, True]),
    "min_p": ((0.1, 0.1), [-0.01, 1.5], ["x", {}]),
    "seed": ((2**64 - 1, 2**64 - 1), [2**64, -2**63 - 1], ["x", 1.5, "1e400"]),
    "presence_penalty": ((-2.0, -2.0), [-2.5, 2.5], ["x"]),
    "frequency_penalty": ((2.0, 2.0), [2.01, -3], ["x"]),
    "repetition_penalty": ((1.2, 1.2), [0.0, -1.0, 1e-300, 0.009, 101.0], ["x"]),
    "logit_bias": (({"3": 5, "7": -100}, ((3, 5.0), (7, -100.0))), [{"3": 101}, {"3": -100.5}],
                   [{"x": 1}, [1, 2], {"3": "big"}]),
    "stop": ((["a", "b"], ("a", "b")), [[str(i) for i in range(17)]], [5, [1, "a"], {"a": 1}]),
    "stop_token_ids": (([1, 2], (1, 2)), [[-1]], [["x"], {"a": 1}]),
    "ignore_eos": ((True, True), [], ["maybe", 2, 1.5]),
    "include_stop_str_in_output": ((True, True), [], ["maybe", [True]]),
    "n": ((3, 3), [0, 129], ["x", 1.5]),
    "logprobs": ((20, 20), [-1, 21], ["x", 0.5]),
    "prompt_logprobs": ((0, 0), [-1, 21], ["x"]),
    "speculative_tokens": ((0, 0), [-1, 65], ["x", 1.5]),
}


def test_every_row_is_tested_and_names_a_field_whose_default_is_in_range():
    assert set(CASES) == {p.name for p in PARAMS}
    field_names = {f.name for f in fields(SamplingParams)}
    for param in PARAMS:
        assert param.name in field_names and param.default == getattr(SamplingParams(), param.name)
    assert checked_sampling(SamplingParams()) == SamplingParams()          # the defaults pass their own rows


@pytest.mark.parametrize("name", CASES)
def test_in_range(name):
    (value, expected), _, _ = CASES[name]
    assert getattr(build_sampling({name: value}), name) == expected


@pytest.mark.parametrize("name, value", [(n, v) for n, (_, bad, _) in CASES.items() for v in bad])
def test_out_of_range_names_the_parameter(name, value):
    with pytest.raises(InvalidRequest) as err:
        build_sampling({name: value})
    assert err.value.param == name and "must be in" in err.value.message


@pytest.mark.parametrize("name, value", [(n, v) for n, (_, _, bad) in CASES.items() for v in bad])
def test_wrong_type_names_the_parameter(name, value):
    with pytest.raises(InvalidRequest) as err:
        build_sampling({name: value})
    assert err.value.param == name and "must be" in err.value.message


@pytest.mark.parametrize("name, text, expected", [
    ("max_tokens", "5", 5), ("max_tokens", "5.0", 5), ("temperature", "0.5", 0.5), ("top_k", "-1", 0),
    ("seed", "18446744073709551615", 2**64 - 1), ("ignore_eos", "true", True), ("ignore_eos", "0", False),
    ("stop", '["a", "b"]', ("a", "b")), ("stop", "end", ("end",)), ("stop_token_ids", "[3]", (3,)),
    ("logit_bias", '{"3": 1.5}', ((3, 1.5),)),
])
def test_text_values_are_read_as_the_rows_type(name, text, expected):
    assert getattr(build_sampling({name: text}), name) == expected


@pytest.mark.parametrize("text", ["nan", "inf", "-inf"])
def test_text_non_finite_floats_are_refused(text):
    with pytest.raises(InvalidRequest, match="must be in") as err:
        build_sampling({"temperature": text})
    assert err.value.param == "temperature"


def test_alias_reads_into_the_field_and_errors_name_the_alias():
    assert build_sampling({"top_logprobs": 5}).logprobs == 5
    assert build_sampling({"max_completion_tokens": 7}).max_tokens == 7
    with pytest.raises(InvalidRequest) as err:
        build_sampling({"top_logprobs": 30})
    assert err.value.param == "top_logprobs"
    with pytest.raises(InvalidRequest, match="second time") as err:
        build_sampling({"logprobs": 1, "top_logprobs": 2})
    assert err.value.param == "top_logprobs"


def test_unknown_and_face_refused_names():
    with pytest.raises(InvalidRequest, match="unsupported") as err:
        build_sampling({"warp": 1})
    assert err.value.param == "warp"
    assert "n" not in TENSOR_NAMES and "temperature" in TENSOR_NAMES
    with pytest.raises(InvalidRequest, match="unsupported") as err:
        build_sampling({"n": 2}, accepted=TENSOR_NAMES)
    assert err.value.param == "n"


def test_none_is_not_given_and_base_fills_the_rest():
    params = build_sampling({"temperature": None, "top_p": 0.5}, base=SamplingParams(max_tokens=None))
    assert (params.temperature, params.top_p, params.max_tokens) == (1.0, 0.5, None)


@pytest.mark.parametrize("values, param", [({"min_tokens": 5, "max_tokens": 4}, "min_tokens"),
                                           ({"max_tokens": 0}, "max_tokens")])
def test_rules_across_parameters(values, param):
    with pytest.raises(InvalidRequest) as err:
        build_sampling(values)
    assert err.value.param == param
    assert build_sampling({"max_tokens": 0, "prompt_logprobs": 0}).max_tokens == 0     # scoring the prompt


def test_greedy_and_top_k_are_normalized():
    params = build_sampling({"temperature": 1e-30, "top_k": -1})
    assert (params.temperature, params.top_k) == (0.0, 0)
    assert checked_sampling(build_sampling({"top_k": 2**64}), vocab_size=100).top_k == 100


def test_checked_sampling_applies_the_table_to_params_built_in_code():
    for bad, param in [(SamplingParams(temperature=3.0), "temperature"), (SamplingParams(seed=2**64), "seed"),
                       (SamplingParams(logit_bias=((1, 500.0),)), "logit_bias"), (SamplingParams(n=0), "n")]:
        with pytest.raises(InvalidRequest) as err:
            checked_sampling(bad)
        assert err.value.param == param


@pytest.mark.parametrize("values, param", [({"logit_bias": {"100": 1}}, "logit_bias"),
                                           ({"stop_token_ids": [100]}, "stop_token_ids")])
def test_token_ids_are_checked_against_the_vocabulary(values, param):
    params = build_sampling(values)
    checked_sampling(params, vocab_size=101)
    with pytest.raises(InvalidRequest, match="outside the vocabulary") as err:
        checked_sampling(params, vocab_size=100)
    assert err.value.param == param


def test_rows_are_unique_and_aliases_name_no_row():
    names = [p.name for p in PARAMS]
    aliases = [a for p in PARAMS for a in p.aliases]
    assert len(set(names)) == len(names) and not set(aliases) & set(names)
    assert BY_NAME["temperature"].bounds() == "[0, 2]" and BY_NAME["top_p"].bounds() == "(0, 1]"
