"""The engine's response cache over a fake backend: what is cached, what is replayed, what never collides."""
from __future__ import annotations

from dataclasses import fields, replace

import pytest

from conch.engine.response_cache import MemoryStore, ResponseCache
from conch.engine.response_cache.key import cache_key
from conch.engine.repository import ModelConfig
from conch.engine.types import GenerationRequest, SamplingParams
from tests.serving_helpers import fake_engine

GREEDY = SamplingParams(max_tokens=6, temperature=0.0)


def _request(i: int = 0, **kw) -> GenerationRequest:
    return GenerationRequest(id=f"r{i}", model="m", prompt=kw.pop("prompt", "hello"),
                             params=kw.pop("params", GREEDY), **kw)


async def _run(engine, request):
    return [d async for d in engine.generate(request)]


def _shape(deltas):
    return [replace(d, request_id="") for d in deltas]


@pytest.fixture
def engine():
    return fake_engine(cache=ResponseCache(MemoryStore()))


async def test_hit_replays_the_same_deltas_under_the_new_id(engine):
    first = await _run(engine, _request(1, params=replace(GREEDY, logprobs=2, n=2)))
    await engine.cache.flush()
    second = await _run(engine, _request(2, params=replace(GREEDY, logprobs=2, n=2)))
    assert engine.get("m").backend.calls == 1
    assert _shape(first) == _shape(second)
    assert {d.request_id for d in second} == {"r2"}
    assert engine.cache.hits["m"] == 1 and engine.cache.misses["m"] == 1


async def test_streamed_and_non_streamed_share_entries(engine):
    await _run(engine, _request(1, stream=True))
    await engine.cache.flush()
    await _run(engine, _request(2, stream=False, priority=3))
    assert engine.get("m").backend.calls == 1


@pytest.mark.parametrize("params", [SamplingParams(max_tokens=4, temperature=0.7),
                                    SamplingParams(max_tokens=4, temperature=1.0, top_p=0.5)])
async def test_nondeterministic_requests_are_never_cached(engine, params):
    for i in range(2):
        await _run(engine, _request(i, params=params))
        await engine.cache.flush()
    assert engine.get("m").backend.calls == 2
    assert not engine.cache.hits and not engine.cache.misses


async def test_seeded_sampling_is_cached(engine):
    seeded = SamplingParams(max_tokens=4, temperature=0.9, seed=7)
    for i in range(2):
        await _run(engine, _request(i, params=seeded))
        await engine.cache.flush()
    assert engine.get("m").backend.calls == 1


async def test_opt_out_and_config_off_bypass_the_cache():
    engine = fake_engine(cache=ResponseCache(MemoryStore()))
    for i in range(2):
        await _run(engine, _request(i, use_cache=False))
        await engine.cache.flush()
    assert engine.get("m").backend.calls == 2
    off = fake_engine(cache=ResponseCache(MemoryStore()), response_cache=False)
    for i in range(2):
        await _run(off, _request(i))
        await off.cache.flush()
    assert off.get("m").backend.calls == 2


async def test_aborted_and_failed_answers_are_not_stored(engine):
    gen = engine.generate(_request(1))
    await gen.__anext__()
    await gen.aclose()                                   # the client went away after one token
    await engine.cache.flush()
    assert len(engine.cache.store) == 0
    engine.get("m").backend.fail = True
    await _run(engine, _request(2))
    await engine.cache.flush()
    assert len(engine.cache.store) == 0


def _variants():
    """Every sampling parameter changed on its own, plus prompt, grammar, model version and weights."""
    base = replace(GREEDY, seed=1)
    changed = {"max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 5, "min_p": 0.1, "seed": 2,
               "presence_penalty": 0.5, "frequency_penalty": 0.5, "repetition_penalty": 1.1,
               "logit_bias": ((5, 1.0),), "stop": ("x",), "stop_token_ids": (9,), "ignore_eos": True, "n": 2,
               "logprobs": 1, "include_stop_str_in_output": True, "min_tokens": 3, "prompt_logprobs": 1,
               "speculative_tokens": 2, "model_defaults": frozenset({"temperature"})}
    assert set(changed) == {f.name for f in fields(SamplingParams)}, "a new sampling parameter needs a case"
    cfg = ModelConfig(name="m")
    req = GenerationRequest(id="a", model="m", prompt_token_ids=(1, 2, 3), params=base)
    out = [(cfg, req)] + [(cfg, replace(req, params=replace(base, **{k: v}))) for k, v in changed.items()]
    out += [(cfg, replace(req, prompt_token_ids=(1, 2, 4))), (cfg, replace(req, grammar={"regex": "a+"})),
            (cfg, replace(req, grammar={"regex": "b+"})), (replace(cfg, version="2"), req),
            (replace(cfg, weights="other"), req), (replace(cfg, name="m2"), replace(req, model="m2"))]
    return out


def test_parameters_that_change_the_output_never_collide():
    keys = [cache_key(cfg, req) for cfg, req in _variants()]
    assert len(set(keys)) == len(keys)


def test_caller_identity_is_not_in_the_key():
    cfg, req = _variants()[0]
    same = [replace(req, id="other"), replace(req, stream=True), replace(req, priority=5),
            replace(req, deadline=1.0), replace(req, use_cache=False)]
    assert {cache_key(cfg, r) for r in same} == {cache_key(cfg, req)}
