"""An ensemble with an LLM step served as an LLM (what /v1 uses): pre-processing on the prompt text, the request's
own sampling parameters and n at the LLM step, post-processing on word-aligned pieces when streaming and on the
whole text otherwise. The example's pre-processing step with the tiny random-weights LLM and a bracketing
post-processing step."""
from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from conch.engine.engine import Engine
from conch.engine.backends.ensemble.generation import MAX_HELD, _merged, _word_ends
from conch.engine.errors import InvalidRequest, ModelNotReady
from conch.engine.repository import ModelRepository
from conch.engine.types import GenerationDelta, GenerationRequest, SamplingParams
from tests.conftest import write_repository

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "model_repository"
BRACKETS = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "raw_text").as_numpy().reshape(-1)[0].decode()
            tensor = pb_utils.Tensor("text_output", np.array([f"[{text}]".encode()], dtype=np.object_))
            out.append(pb_utils.InferenceResponse(output_tensors=[tensor]))
        return out
'''
TENSOR_ONLY = '''name: "tensor_only"
platform: "ensemble"
input [ { name: "prompt", data_type: TYPE_STRING, dims: [ 1 ] } ]
output [ { name: "text_input", data_type: TYPE_STRING, dims: [ 1 ] } ]
ensemble_scheduling { step [ { model_name: "preprocess" input_map { key: "prompt" value: "prompt" }
                               output_map { key: "text_input" value: "text_input" } } ] }
'''


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    # one token a step (no multi-token steps), so a streamed delta is one token and pieces count them
    write_repository(root, {"smollm2": {"weights": "builtin:tiny", "dtype": "float32", "speculative_tokens": 0}})
    for name in ("preprocess", "postprocess", "assistant"):
        shutil.copytree(EXAMPLE / name, root / name)
    (root / "postprocess" / "1" / "model.py").write_text(BRACKETS)
    (root / "tensor_only" / "1").mkdir(parents=True)
    (root / "tensor_only" / "config.pbtxt").write_text(TENSOR_ONLY)
    return root


def run(repo: Path, body):
    async def main():
        engine = Engine(ModelRepository(repo))
        await engine.start()
        try:
            return await body(engine)
        finally:
            await engine.stop()
    return asyncio.run(main())


def request(prompt="Say hi", stream=False, **params) -> GenerationRequest:
    params = {"max_tokens": 4, "temperature": 0.0, **params}
    return GenerationRequest(id="r1", model="assistant", prompt=prompt, params=SamplingParams(**params), stream=stream)


async def collect(engine: Engine, gen: GenerationRequest) -> list:
    return [d async for d in engine.generate(await engine.prepare(gen))]


def test_offers_the_llm_steps_tokenizer_and_context(repo):
    async def body(engine):
        ensemble, llm = engine.get("assistant"), engine.get("smollm2")
        assert ensemble.tokenizer is llm.tokenizer and ensemble.context_length == llm.context_length
        assert ensemble.backend.capabilities.text_prompt and ensemble.backend.capabilities.n
    run(repo, body)


def test_not_streamed_post_processes_each_choice_whole(repo):
    async def body(engine):
        deltas = await collect(engine, request(n=2))
        raw = await collect(engine, GenerationRequest(id="r2", model="smollm2", prompt="Question: Say hi\nAnswer:",
                                                      params=SamplingParams(max_tokens=4, temperature=0.0)))
        return deltas, raw
    deltas, raw = run(repo, body)
    assert sorted(d.index for d in deltas) == [0, 1] and all(d.finished and d.request_id == "r1" for d in deltas)
    whole = "".join(d.text for d in raw)
    for d in deltas:                            # the LLM saw the pre-processed prompt; post ran once on all of it
        assert d.text == f"[{whole}]" and len(d.token_ids) == 4
        assert d.usage.prompt_tokens == raw[-1].usage.prompt_tokens and d.usage.completion_tokens == 4


def test_streamed_post_processes_word_aligned_pieces(repo):
    deltas = run(repo, lambda engine: collect(engine, request(stream=True, max_tokens=MAX_HELD + 4)))
    pieces = [d for d in deltas if d.text]      # the tiny model's text has no spaces: held MAX_HELD deltas at most
    assert [len(d.token_ids) for d in pieces] == [MAX_HELD, 4]
    assert all(d.text.startswith("[") and d.text.endswith("]") for d in pieces)
    assert deltas[-1].finished and deltas[-1].usage.completion_tokens == MAX_HELD + 4


def test_word_boundaries_split_the_stream():
    def deltas(*texts):
        return [GenerationDelta("r", token_ids=(i,), text=t) for i, t in enumerate(texts)]
    held, pieces = [], []
    for d in deltas("The", " he", "ck", ".", "\n", "Hi"):
        if held and _word_ends(held, d):
            pieces.append(_merged(held))
            held = []
        held.append(d)
    pieces.append(_merged(held))
    assert [(p.text, p.token_ids) for p in pieces] == [("The", (0,)), (" heck.", (1, 2, 3)), ("\n", (4,)),
                                                        ("Hi", (5,))]


def test_prompt_token_ids_are_decoded_to_text(repo):
    async def body(engine):
        ids = tuple(engine.get("assistant").tokenizer.encode("Say hi"))
        by_ids = await collect(engine, GenerationRequest(id="r3", model="assistant", prompt_token_ids=ids,
                                                         params=SamplingParams(max_tokens=4, temperature=0.0)))
        return by_ids, await collect(engine, request())
    by_ids, by_text = run(repo, body)
    assert by_ids[-1].text == by_text[-1].text


def test_the_llm_step_checks_the_context(repo):
    async def body(engine):
        with pytest.raises(InvalidRequest, match="maximum context length"):
            await collect(engine, request(max_tokens=2047))
    run(repo, body)


def test_tensor_only_ensembles_and_python_models_refuse_text_prompts(repo):
    async def body(engine):
        with pytest.raises(InvalidRequest, match="tensor_only.*0 LLM steps"):
            await engine.prepare(GenerationRequest(id="t", model="tensor_only", prompt="x"))
        with pytest.raises(InvalidRequest, match="preprocess"):
            _ = engine.get("preprocess").tokenizer
        await engine.unload("smollm2")
        with pytest.raises(ModelNotReady, match="LLM step 'smollm2'"):
            await engine.prepare(request())
        assert engine.get("assistant").context_length == 0
    run(repo, body)
