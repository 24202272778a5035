"""Ensemble DAG checks at load, and Triton-style sampling parameters (string values accepted)."""
from __future__ import annotations

import pytest

from conch.engine.backends.ensemble.graph import plan
from conch.engine.errors import InvalidRequest, ModelNotFound
from conch.engine.repository.config import ModelConfig
from conch.engine.repository.specs import EnsembleStep, TensorSpec
from conch.engine.tensors.sampling import sampling_params

PRE = ModelConfig("pre", backend="python", inputs=(TensorSpec("prompt", "BYTES", (1,)),),
                  outputs=(TensorSpec("text_input", "BYTES", (1,)),))
LLM = ModelConfig("llm")
MODELS = {"pre": PRE, "llm": LLM}


def lookup(name: str) -> ModelConfig:
    if name not in MODELS:
        raise ModelNotFound(f"model '{name}' is not in the repository")
    return MODELS[name]


def ensemble(*steps: EnsembleStep, outputs=("out",)) -> ModelConfig:
    return ModelConfig("ens", backend="ensemble", inputs=(TensorSpec("p", "BYTES", (1,)),),
                       outputs=tuple(TensorSpec(o, "BYTES") for o in outputs), steps=steps)


PRE_STEP = EnsembleStep("pre", (("prompt", "p"),), (("text_input", "t"),))
LLM_STEP = EnsembleStep("llm", (("text_input", "t"),), (("text_output", "out"),))


def test_plan_orders_steps():
    assert plan(ensemble(LLM_STEP, PRE_STEP), lookup) == (PRE_STEP, LLM_STEP)


@pytest.mark.parametrize("steps, words", [
    ((EnsembleStep("ghost", (), ()),), "unknown model 'ghost'"),
    ((EnsembleStep("pre", (("nope", "p"),), ()),), "no input 'nope'"),
    ((EnsembleStep("pre", (("prompt", "p"),), (("nope", "t"),)),), "no output 'nope'"),
    ((EnsembleStep("llm", (("text_input", "missing"),), (("text_output", "out"),)),), "produced by no step"),
    ((PRE_STEP, EnsembleStep("pre", (("prompt", "p"),), (("text_input", "t"),))), "more than once"),
    ((EnsembleStep("pre", (), (("text_input", "t"),)),), "required input"),
    ((PRE_STEP,), "output(s) ['out']"),
])
def test_plan_rejects(steps, words):
    with pytest.raises(InvalidRequest, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        plan(ensemble(*steps), lookup)


def test_sampling_strings_are_coerced():
    p = sampling_params({"max_tokens": "5", "temperature": "0", "top_p": "0.5", "ignore_eos": "true",
                         "stop": '["a", "b"]', "top_k": -1, "stream": True})
    assert (p.max_tokens, p.temperature, p.top_p, p.ignore_eos, p.stop, p.top_k) == (5, 0.0, 0.5, True, ("a", "b"), 0)


@pytest.mark.parametrize("values, param", [({"max_tokens": "x"}, "max_tokens"), ({"top_p": 2}, "top_p"),
                                           ({"warp": 1}, "warp"), ({"max_tokens": 1.5}, "max_tokens")])
def test_sampling_rejects(values, param):
    with pytest.raises(InvalidRequest) as err:
        sampling_params(values)
    assert err.value.param == param
