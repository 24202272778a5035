"""Triton's dynamic batcher over a real server: the embedding model by /v1/embeddings, /v2 infer and gRPC
(tensor contract TEXT / INPUT_IDS -> EMBEDDING), a python model whose execute() gets several requests at
once, a bad input that fails only its own request, and the REJECT queue policy's 503."""
from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.conftest import write_repository
from tests.gateway.kserve.triton_repo import start_triton

EMB = {"backend": "embedding", "weights": "builtin:minilm", "dtype": "float32"}
QUEUED_PBTXT = '''name: "minilm-q"
backend: "embedding"
max_batch_size: 1
parameters { key: "weights" value: { string_value: "builtin:minilm" } }
parameters { key: "dtype" value: { string_value: "float32" } }
dynamic_batching { default_queue_policy { timeout_action: REJECT max_queue_size: 1 } }
'''
BATCHPY_PBTXT = '''name: "batchpy"
backend: "python"
max_batch_size: 16
input [ { name: "x", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "y", data_type: TYPE_INT32, dims: [ 1 ] }, { name: "seen", data_type: TYPE_INT32, dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 20000 }
'''
BATCHPY = '''
import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        time.sleep(0.05)
        seen = np.array([len(requests)], dtype=np.int32)
        return [pb_utils.InferenceResponse([
            pb_utils.Tensor("y", pb_utils.get_input_tensor_by_name(r, "x").as_numpy() * 2),
            pb_utils.Tensor("seen", seen)]) for r in requests]
'''
TEXTS = ["The cat sits on the mat.", "hello world"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    write_repository(root, {"minilm": {**EMB, "max_batch_size": 32,
                                       "dynamic_batching": {"max_queue_delay_microseconds": 2000}}})
    for name, text in (("minilm-q", QUEUED_PBTXT), ("batchpy", BATCHPY_PBTXT)):
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(text)
    (root / "batchpy" / "1" / "model.py").write_text(BATCHPY)
    server = start_triton(root)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def token_ids(tokenizer):
    return lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]


def _text_input(module, texts):
    t = module.InferInput("TEXT", [len(texts)], "BYTES")
    t.set_data_from_numpy(np.array([s.encode() for s in texts], dtype=np.object_))
    return t


def test_http_infer_text_and_ids(http_client, reference, token_ids):
    out = http_client.infer("minilm", [_text_input(httpclient, TEXTS)])
    np.testing.assert_allclose(out.as_numpy("EMBEDDING"), reference(TEXTS), atol=2e-5)
    ids = [token_ids(t) for t in TEXTS]
    width = max(map(len, ids))
    padded = np.array([row + [0] * (width - len(row)) for row in ids], dtype=np.int64)   # 0 = [PAD]
    t = httpclient.InferInput("INPUT_IDS", list(padded.shape), "INT64")
    t.set_data_from_numpy(padded)
    by_ids = http_client.infer("minilm", [t]).as_numpy("EMBEDDING")
    np.testing.assert_allclose(by_ids, reference(TEXTS), atol=2e-5)


def test_grpc_infer_and_metadata(grpc_client, http_client, reference):
    out = grpc_client.infer("minilm", [_text_input(grpcclient, TEXTS)])
    np.testing.assert_allclose(out.as_numpy("EMBEDDING"), reference(TEXTS), atol=2e-5)
    meta = http_client.get_model_metadata("minilm")
    assert [(t["name"], t["datatype"]) for t in meta["inputs"]] == [("TEXT", "BYTES"), ("INPUT_IDS", "INT64")]
    assert [(t["name"], t["datatype"], t["shape"]) for t in meta["outputs"]] == [("EMBEDDING", "FP32", [-1, -1])]


def test_v2_bad_tensor_is_400(server):
    r = httpx.post(f"{server.url}/v2/models/minilm/infer",
                   json={"inputs": [{"name": "TEXT", "datatype": "INT32", "shape": [1], "data": [1]}]})
    assert r.status_code == 400 and "TEXT" in r.json()["error"]


async def _embed(http: httpx.AsyncClient, body: dict) -> httpx.Response:
    return await http.post("/v1/embeddings", json={"model": "minilm", "encoding_format": "float", **body})


def _counter(metrics: str, name: str, model: str) -> float:
    line = next(row for row in metrics.splitlines() if row.startswith(f'{name}{{model="{model}"'))
    return float(line.rsplit(" ", 1)[1])


async def test_concurrent_requests_are_batched_and_a_bad_one_fails_alone(server, reference):
    texts = [f"request {i} is about {'xyzw'[i % 4]} things" for i in range(32)]
    bodies = [{"input": t} for t in texts]
    bodies[7] = {"input": [[10 ** 6]]}                                     # out of the vocabulary
    before = httpx.get(f"{server.url}/metrics").text
    async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
        replies = await asyncio.gather(*(_embed(http, b) for b in bodies))
    assert replies[7].status_code == 400 and replies[7].json()["error"]["param"] == "input"
    expected = reference(texts)
    for i, r in enumerate(replies):
        if i != 7:
            assert r.status_code == 200, r.text
            np.testing.assert_allclose(r.json()["data"][0]["embedding"], expected[i], atol=2e-5)
    after = httpx.get(f"{server.url}/metrics").text
    runs = _counter(after, "nv_inference_exec_count", "minilm") - _counter(before, "nv_inference_exec_count", "minilm")
    served = _counter(after, "nv_inference_count", "minilm") - _counter(before, "nv_inference_count", "minilm")
    assert served == 31
    assert runs < served                      # fewer forwards than requests: batches held several


def test_python_model_execute_gets_several_requests(server):
    import concurrent.futures

    def one(x: int):
        r = httpx.post(f"{server.url}/v2/models/batchpy/infer", timeout=60,
                       json={"inputs": [{"name": "x", "datatype": "INT32", "shape": [1, 1], "data": [x]}]})
        outputs = {o["name"]: o["data"][0] for o in r.json()["outputs"]}
        return outputs["y"], outputs["seen"]

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        results = list(pool.map(one, range(12)))
    assert [y for y, _ in results] == [2 * x for x in range(12)]
    assert max(seen for _, seen in results) > 1


async def test_full_queue_rejects_with_503(server):
    body = {"model": "minilm-q", "input": "a long sentence " * 60}
    async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
        replies = await asyncio.gather(*(http.post("/v1/embeddings", json=body) for _ in range(16)))
    codes = sorted(r.status_code for r in replies)
    assert set(codes) == {200, 503}, codes
    refused = next(r for r in replies if r.status_code == 503)
    assert refused.json()["error"]["code"] == "overloaded" and "Retry-After" in refused.headers
