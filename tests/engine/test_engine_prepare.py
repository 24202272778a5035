"""Engine.prepare runs once per request: generate takes the request prepare returned as it is, and prepares
any other (a request never prepared, or a copy changed since); it refuses what the model's backend cannot
honour."""
from __future__ import annotations

from dataclasses import replace

import pytest

import conch.engine.engine as engine_module
from conch.engine.backend import Capabilities
from conch.engine.engine import Engine
from conch.engine.errors import InvalidRequest
from conch.engine.repository import ModelConfig, ModelRepository
from conch.engine.types import GenerationRequest, SamplingParams


@pytest.fixture(scope="module")
async def engine(tmp_path_factory):
    engine = Engine(ModelRepository(tmp_path_factory.mktemp("prepare")))
    await engine.load("m", ModelConfig(name="m", weights="builtin:tiny", dtype="float32", response_cache=False))
    yield engine
    await engine.stop()


async def _tokens(engine: Engine, request: GenerationRequest) -> list[int]:
    return [t async for d in engine.generate(request) for t in d.token_ids]


async def test_generate_does_not_prepare_a_prepared_request_again(engine, monkeypatch):
    calls = []

    def counted(model, request, prompt_param="prompt"):
        calls.append(request.id)
        return tokenize(model, request, prompt_param)

    tokenize = engine_module.tokenize
    monkeypatch.setattr(engine_module, "tokenize", counted)
    request = GenerationRequest(id="r", model="m", prompt="Hello there",
                                params=SamplingParams(max_tokens=3, temperature=0.0, ignore_eos=True))
    prepared = await engine.prepare(request)
    assert len(await _tokens(engine, prepared)) == 3 and calls == ["r"]
    assert len(await _tokens(engine, request)) == 3 and calls == ["r", "r"]         # never prepared: once here
    changed = replace(prepared, params=replace(prepared.params, max_tokens=2))
    assert len(await _tokens(engine, changed)) == 2 and calls == ["r", "r", "r"]    # a changed copy: again


async def test_speculative_tokens_is_refused_by_name_where_the_backend_cannot_honour_it(engine, monkeypatch):
    request = GenerationRequest(id="r", model="m", prompt="Hello there",
                                params=SamplingParams(max_tokens=3, temperature=0.0, speculative_tokens=0))
    assert (await engine.prepare(request)).params.speculative_tokens == 0       # transformers: multi-token steps
    monkeypatch.setattr(engine.get("m").backend, "capabilities", Capabilities(grammar=True))
    with pytest.raises(InvalidRequest) as refused:
        await engine.prepare(request)
    assert refused.value.param == "speculative_tokens"
