"""Model control end to end: explicit load/unload (with a config override, over HTTP and gRPC), and
poll mode picking up a new version, a broken newer version leaving the serving one untouched."""
from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import tritonclient.grpc as grpcclient

from tests.gateway.kserve.triton_repo import build_repository, eventually, start_triton

ECHO = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        {init}

    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "x").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x * {factor})]))
        return out
'''
ECHO_PBTXT = '''name: "echo"
backend: "python"
input [ { name: "x", data_type: TYPE_INT32, dims: [ -1 ] } ]
output [ { name: "y", data_type: TYPE_INT32, dims: [ -1 ] } ]
'''


def write_echo(root: Path, version: int, factor: int, broken: bool = False) -> None:
    folder = root / "echo" / str(version)
    folder.mkdir(parents=True, exist_ok=True)
    (root / "echo" / "config.pbtxt").write_text(ECHO_PBTXT)
    init = "raise RuntimeError('broken weights')" if broken else "pass"
    (folder / "model.py").write_text(ECHO.format(init=init, factor=factor))


def echo(url: str) -> tuple[int, list]:
    r = httpx.post(f"{url}/v2/models/echo/infer",
                   json={"inputs": [{"name": "x", "datatype": "INT32", "shape": [2], "data": [1, 2]}]})
    body = r.json()
    return r.status_code, body["outputs"][0]["data"] if r.status_code == 200 else body["error"]


@pytest.fixture(scope="module")
def explicit(tmp_path_factory):
    root = build_repository(tmp_path_factory.mktemp("repo"), vllm=True)
    write_echo(root, 1, 10)
    server = start_triton(root, "--model-control-mode", "explicit", "--load-model", "tiny")
    yield server
    server.stop()


def test_explicit_load_unload(explicit):
    url = explicit.url
    index = {m["name"]: m["state"] for m in httpx.post(f"{url}/v2/repository/index").json()}
    assert index["tiny"] == "READY" and index["echo"] == "UNAVAILABLE"
    assert httpx.post(f"{url}/v2/repository/models/echo/load").status_code == 200
    assert echo(url) == (200, [10, 20])
    assert httpx.post(f"{url}/v2/repository/models/echo/unload").status_code == 200
    assert echo(url)[0] in (404, 503)
    ready = httpx.post(f"{url}/v2/repository/index", json={"ready": True}).json()
    assert [m["name"] for m in ready] == ["tiny"]


def test_explicit_errors(explicit):
    r = httpx.post(f"{explicit.url}/v2/repository/models/nope/load")
    assert r.status_code == 404 and "nope" in r.json()["error"]
    r = httpx.post(f"{explicit.url}/v2/repository/models/vllm_model/load")
    assert r.status_code == 503 and "backend 'vllm' is not available" in r.json()["error"]
    assert httpx.get(f"{explicit.url}/v2/health/ready").status_code == 200     # the rest keeps serving


def test_load_ensemble_brings_up_its_steps_over_grpc(explicit):
    with grpcclient.InferenceServerClient(f"127.0.0.1:{explicit.grpc_port}") as client:
        client.load_model("assistant")
        assert client.is_model_ready("assistant") and client.is_model_ready("preprocess")
        client.unload_model("assistant")
        assert not client.is_model_ready("assistant")


def test_load_with_config_override(explicit):
    override = '{"weights": "builtin:tiny", "dtype": "float32", "context_length": 64}'
    r = httpx.post(f"{explicit.url}/v2/repository/models/tiny/load", json={"parameters": {"config": override}})
    assert r.status_code == 200
    config = httpx.get(f"{explicit.url}/v2/models/tiny/config").json()
    assert config["parameters"]["context_length"]["string_value"] == "64"


def test_unload_lets_in_flight_requests_finish(explicit):
    import json as _json
    import threading

    events: list = []

    def stream() -> None:
        body = {"text_input": "Hi", "parameters": {"max_tokens": 60, "ignore_eos": True}}
        with httpx.stream("POST", f"{explicit.url}/v2/models/tiny/generate_stream", json=body, timeout=60) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events.append(_json.loads(line[6:]))

    worker = threading.Thread(target=stream)
    worker.start()
    assert eventually(lambda: len(events) >= 1)
    assert httpx.post(f"{explicit.url}/v2/repository/models/tiny/unload", timeout=60).status_code == 200
    worker.join(60)
    assert "error" not in events[-1] and len(events) >= 10      # the stream ran to its end
    assert httpx.post(f"{explicit.url}/v2/models/tiny/generate", json={"text_input": "x"}).status_code in (404, 503)


def test_poll_mode_new_and_broken_versions(tmp_path):
    root = build_repository(tmp_path, example=False, vllm=False)
    write_echo(root, 1, 10)
    server = start_triton(root, "--model-control-mode", "poll", "--repository-poll-secs", "0.5")
    try:
        assert echo(server.url) == (200, [10, 20])
        write_echo(root, 2, 100)
        assert eventually(lambda: echo(server.url) == (200, [100, 200]))
        write_echo(root, 3, 1000, broken=True)
        index = lambda: {m["name"]: m for m in httpx.post(f"{server.url}/v2/repository/index").json()}  # noqa: E731
        assert eventually(lambda: "broken weights" in index()["echo"]["reason"])
        assert echo(server.url) == (200, [100, 200])             # version 2 still serves
        assert index()["echo"]["version"] == "2"
        r = httpx.post(f"{server.url}/v2/repository/models/echo/unload")
        assert r.status_code == 400                               # poll mode: no explicit control
    finally:
        server.stop()

