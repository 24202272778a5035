"""Triton's repository semantics with tritonclient: unload_dependents unloads an ensemble's steps, an ensemble
with a step missing is unavailable (ready false, metadata 400, UNAVAILABLE in the index with the reason), a
server with nothing loaded in explicit mode is ready, and server metadata lists only extensions that exist."""
from __future__ import annotations

import httpx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.gateway.kserve.triton_repo import build_repository, start_triton

STEPS = ("preprocess", "smollm2", "postprocess")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = build_repository(tmp_path_factory.mktemp("repo"), vllm=False)
    s = start_triton(root, "--model-control-mode", "explicit", "--load-model", "tiny")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def http(server):
    with httpclient.InferenceServerClient(server.url.removeprefix("http://")) as client:
        yield client


def _index(server) -> dict[str, dict]:
    return {m["name"]: m for m in httpx.post(f"{server.url}/v2/repository/index").json()}


def test_unloading_a_step_makes_its_ensemble_unavailable_until_it_is_back(server, http):
    http.load_model("assistant")
    assert http.is_model_ready("assistant")
    http.unload_model("preprocess")
    assert not http.is_model_ready("assistant")
    assert httpx.get(f"{server.url}/v2/models/assistant/ready").status_code == 400
    r = httpx.get(f"{server.url}/v2/models/assistant")
    assert r.status_code == 400 and "preprocess" in r.json()["error"]
    entry = _index(server)["assistant"]
    assert entry["state"] == "UNAVAILABLE" and "preprocess" in entry["reason"]
    assert httpx.get(f"{server.url}/v2/health/ready").status_code == 503   # a model that should serve does not
    http.load_model("preprocess")
    assert http.is_model_ready("assistant") and _index(server)["assistant"]["state"] == "READY"
    assert http.is_server_ready()


def test_unload_dependents_unloads_the_steps_over_http(server, http):
    http.load_model("assistant")
    assert all(http.is_model_ready(step) for step in STEPS)
    http.unload_model("assistant", unload_dependents=True)
    assert not any(http.is_model_ready(m) for m in ("assistant", *STEPS))
    assert http.is_model_ready("tiny")                 # not a step: stays


def test_unload_without_dependents_keeps_the_steps_over_grpc(server, http):
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        client.load_model("assistant")
        client.unload_model("assistant")
        assert all(client.is_model_ready(step) for step in STEPS)
        client.load_model("assistant")
        client.unload_model("assistant", unload_dependents=True)
        assert not any(client.is_model_ready(m) for m in ("assistant", *STEPS))


def test_bad_unload_dependents_is_400(server):
    r = httpx.post(f"{server.url}/v2/repository/models/tiny/unload", json={"parameters": {"unload_dependents": "x"}})
    assert r.status_code == 400 and "unload_dependents" in r.json()["error"]


def test_server_metadata_lists_only_implemented_extensions(http):
    extensions = set(http.get_server_metadata()["extensions"])
    assert "model_repository(unload_dependents)" in extensions and "generate" in extensions
    assert not extensions & {"classification", "sequence"}


def test_explicit_mode_with_nothing_loaded_is_ready(server, http):
    for entry in _index(server).values():
        if entry["state"] == "READY":
            http.unload_model(entry["name"])
    assert not httpx.post(f"{server.url}/v2/repository/index", json={"ready": True}).json()
    assert http.is_server_ready() and httpx.get(f"{server.url}/v2/health/ready").status_code == 200
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        assert client.is_server_ready()
    http.load_model("tiny")
    with pytest.raises(InferenceServerException):
        http.get_model_metadata("assistant")          # not loaded: not served
