"""Request isolation over a real server: a client's request id is only a label (requests that share one each
get their own answer, and a disconnect cancels only its own), and the engine's key never collides.

Requests with the same id are sent together, each with its own prompt and its own `max_tokens` (EOS ignored),
so each answer can be told apart: its text starts with its own prompt and it has exactly its own token count.
Timeouts are failure detectors only (before the fix, one of two requests sharing an id never returned).
"""
from __future__ import annotations

import asyncio
import json
import queue

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient
from openai import AsyncOpenAI
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.kserve.triton_repo import build_repository, eventually, start_triton

PROMPTS = [f"request {name} says" for name in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")]
MAX_TOKENS = [24 + 5 * i for i in range(len(PROMPTS))]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = start_triton(build_repository(tmp_path_factory.mktemp("repo"), example=False, vllm=False))
    yield server
    server.stop()


def _params(max_tokens: int) -> dict:
    return {"max_tokens": max_tokens, "ignore_eos": True, "temperature": 0, "return_num_output_tokens": True}


def test_v2_generate_with_one_client_id_each_gets_its_own_answer(server):
    async def main():
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
            return await asyncio.gather(*(
                client.post("/v2/models/tiny/generate", json={"id": "1", "text_input": p, "parameters": _params(m)})
                for p, m in zip(PROMPTS, MAX_TOKENS, strict=True)))
    responses = asyncio.run(main())
    for r, prompt, max_tokens in zip(responses, PROMPTS, MAX_TOKENS, strict=True):
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["id"] == "1"                             # the client's id is echoed
        assert body["text_output"].startswith(prompt) and body["num_output_tokens"] == max_tokens


def _llm_inputs(text: str, params: dict, **flags: bool) -> list:
    def tensor(name, value, datatype):
        t = grpcclient.InferInput(name, [1], datatype)
        t.set_data_from_numpy(np.array([value], dtype=np.object_ if datatype == "BYTES" else bool))
        return t
    sampling = {k: v for k, v in params.items() if not k.startswith("return_")}
    return [tensor("text_input", text.encode(), "BYTES"),
            tensor("sampling_parameters", json.dumps(sampling).encode(), "BYTES"),
            tensor("return_num_output_tokens", True, "BOOL"), *(tensor(k, v, "BOOL") for k, v in flags.items())]


def test_grpc_model_infer_with_one_client_id_each_gets_its_own_answer(server):
    async def main():
        client = aioclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
        try:
            return await asyncio.gather(*(
                client.infer("tiny", _llm_inputs(p, _params(m)), request_id="1", client_timeout=120)
                for p, m in zip(PROMPTS, MAX_TOKENS, strict=True)))
        finally:
            await client.close()
    results = asyncio.run(main())
    for result, prompt, max_tokens in zip(results, PROMPTS, MAX_TOKENS, strict=True):
        assert result.get_response().id == "1"
        assert result.as_numpy("text_output")[0].decode().startswith(prompt)
        assert result.as_numpy("num_output_tokens")[0] == max_tokens


def test_grpc_stream_infer_with_one_client_id_every_request_finishes(server):
    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        for prompt, max_tokens in zip(PROMPTS, MAX_TOKENS, strict=True):
            client.async_stream_infer("tiny", _llm_inputs(prompt, _params(max_tokens), stream=True), request_id="1",
                                      enable_empty_final_response=True)
        finals, counts, tokens = 0, [], 0
        while finals < len(PROMPTS):
            result, error = responses.get(timeout=120)
            assert error is None, error
            response = result.get_response()
            assert response.id == "1"
            if response.parameters["triton_final_response"].bool_param:
                finals += 1
                continue
            tokens += 1
            if "num_output_tokens" in {o.name for o in response.outputs}:
                counts.append(int(result.as_numpy("num_output_tokens")[0]))
        assert sorted(counts) == MAX_TOKENS                  # each request ended once, with its own length
        assert tokens <= sum(MAX_TOKENS)
    finally:
        client.stop_stream()
        client.close()


def test_v1_with_one_request_id_header_and_user_each_gets_its_own_answer(server):
    async def main():
        client = AsyncOpenAI(base_url=server.v1, api_key="none", timeout=120, default_headers={"X-Request-Id": "1"})
        try:
            return await asyncio.gather(*(
                client.completions.create(model="tiny", prompt=p, max_tokens=m, temperature=0, user="same-user",
                                          echo=True, extra_body={"ignore_eos": True})
                for p, m in zip(PROMPTS, MAX_TOKENS, strict=True)))
        finally:
            await client.close()
    completions = asyncio.run(main())
    assert len({c.id for c in completions}) == len(PROMPTS)
    for c, prompt, max_tokens in zip(completions, PROMPTS, MAX_TOKENS, strict=True):
        assert c.choices[0].text.startswith(prompt) and c.usage.completion_tokens == max_tokens


def _metric(server, name: str) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if f.name == name and s.labels.get("model") == "tiny")


def test_a_disconnect_cancels_only_its_own_request_when_ids_are_shared(server):
    cancelled = _metric(server, "conch_request_cancelled")

    async def main():
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
            body = {"id": "1", "text_input": PROMPTS[0], "parameters": _params(1500)}
            async with client.stream("POST", "/v2/models/tiny/generate_stream", json=body) as gone:
                lines = gone.aiter_lines()
                first = await anext(lines)                     # it runs...
                kept = asyncio.create_task(client.post(
                    "/v2/models/tiny/generate", json={"id": "1", "text_input": PROMPTS[1], "parameters": _params(40)}))
                for _ in range(40):                            # ...beside the second one
                    await anext(lines)
            return first, await kept                           # its client went away; the second goes on
    first, kept = asyncio.run(main())
    assert first.startswith("data: ")
    assert kept.status_code == 200 and kept.json()["num_output_tokens"] == 40
    assert eventually(lambda: _metric(server, "conch_request_cancelled") == cancelled + 1, timeout=60)
    assert eventually(lambda: _metric(server, "conch_num_requests_running") == 0, timeout=60)
