"""Triton's Python-backend surface, served and called with tritonclient over HTTP and gRPC: the version folder
on sys.path, auto_complete_config, Logger, DLPack, error responses, decoupled models (response senders, the
final flag, gRPC streaming), BLS (exec, exec(decoupled=True), async_exec, an LLM called through BLS) and a
per-model EXECUTION_ENV_PATH."""
from __future__ import annotations

import queue

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.engine.backends.python.python_repo import build
from tests.gateway.kserve.triton_repo import start_triton


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = build(tmp_path_factory.mktemp("repo"))
    server = start_triton(root)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def http(server):
    return httpclient.InferenceServerClient(server.url.removeprefix("http://"))


@pytest.fixture(scope="module")
def grpc(server):
    return grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")


def _n(module, n: int):
    tensor = module.InferInput("N", [1], "INT32")
    tensor.set_data_from_numpy(np.array([n], dtype=np.int32))
    return tensor


def test_auto_completed_config_lib_import_dlpack_and_logger(server, http):
    config = http.get_model_config("adder")
    assert [i["name"] for i in config["input"]] == ["X"] and [o["name"] for o in config["output"]] == ["Y"]
    x = httpclient.InferInput("X", [3], "FP32")
    x.set_data_from_numpy(np.array([1, 2, 3], dtype=np.float32))
    assert http.infer("adder", [x]).as_numpy("Y").tolist() == [2, 3, 4]
    assert "conch-logger-line" in server.log.read_text()


def test_an_error_response_fails_the_request_with_its_message(http):
    x = httpclient.InferInput("X", [1], "FP32")
    x.set_data_from_numpy(np.array([-1], dtype=np.float32))
    with pytest.raises(InferenceServerException, match="non-negative") as info:
        http.infer("adder", [x])
    assert info.value.status() == "400"            # TritonError.INVALID_ARG is the client's fault


def test_decoupled_model_streams_over_grpc_until_the_final_flag(grpc):
    answers: queue.Queue = queue.Queue()
    grpc.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        grpc.async_stream_infer("counter", [_n(grpcclient, 4)], request_id="c1")
        got = [answers.get(timeout=60) for _ in range(4)]
    finally:
        grpc.stop_stream()
    assert [error for _, error in got] == [None] * 4
    assert [int(result.as_numpy("I")[0]) for result, _ in got] == [0, 1, 2, 3]


def test_bls_sync_calls_a_model_a_decoupled_model_and_an_llm(http):
    result = http.infer("bls", [_n(httpclient, 3)])
    assert result.as_numpy("SUM").tolist() == [6.0]                 # (0+1) + (1+1) + (2+1)
    assert result.as_numpy("COUNTED").tolist() == [0, 1, 2]
    assert result.as_numpy("TEXT").reshape(-1)[0].decode().startswith("Hello")
    assert "non-negative" in result.as_numpy("ERROR").reshape(-1)[0].decode()   # an error response, not a raise


def test_bls_async_exec_from_an_async_execute(grpc):
    result = grpc.infer("bls_async", [_n(grpcclient, 2)])
    assert result.as_numpy("SUM").tolist() == [3.0] and result.as_numpy("COUNTED").tolist() == [0, 1]


def test_execution_env_path_serves_that_model_only(http):
    assert http.infer("withenv", [_n(httpclient, 1)]).as_numpy("WHERE").reshape(-1)[0] == b"the model venv"
    with pytest.raises(ImportError):
        __import__("conch_only_here")                 # nor is it on this process's path, of course
