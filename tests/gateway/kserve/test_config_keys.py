"""Triton's config keys end to end: `--load-model` of an ensemble brings up its steps (explicit mode),
instance_group runs two requests in two python instances at once, model_warmup runs at load,
response_cache is per model, sequence batching runs a python model's sequences in order with their controls and
implicit state, and a key Conch does not honour fails the load naming it."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.gateway.kserve.keys_repo import build_keys_repository
from tests.gateway.kserve.triton_repo import start_triton


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = build_keys_repository(tmp_path_factory.mktemp("repo"))
    server = start_triton(root, "--model-control-mode", "explicit", "--response-cache", "memory",
                          *[arg for m in ("pipe", "meet2", "meet1", "cached", "uncached", "stateful", "accumulate",
                                      "limited_a", "limited_b", "free_c")
                            for arg in ("--load-model", m)])
    server.root = root
    yield server
    server.stop()


def _meet(url: str, model: str) -> tuple[int, str]:
    with httpclient.InferenceServerClient(url.removeprefix("http://")) as client:
        x = httpclient.InferInput("X", [1], "INT32")
        x.set_data_from_numpy(np.array([1], dtype=np.int32))
        result = client.infer(model, [x])
        return int(result.as_numpy("OVERLAP")[0]), result.as_numpy("INSTANCE")[0].decode()


def test_load_model_ensemble_loads_its_steps_and_warmup_ran_first(server):
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        assert client.is_model_ready("pipe") and client.is_model_ready("warm")
        x = grpcclient.InferInput("IN", [1, 1], "INT32")
        x.set_data_from_numpy(np.array([[41]], dtype=np.int32))
        result = client.infer("pipe", [x])
    assert result.as_numpy("OUT").tolist() == [[42]]
    assert result.as_numpy("SEEN").tolist() == [[2]]       # the warmup sample ran twice before any request


def test_two_instances_run_two_requests_at_once(server):
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: _meet(server.url, "meet2"), range(2)))
    assert [overlap for overlap, _ in answers] == [1, 1]
    assert {instance for _, instance in answers} == {"meet2_0", "meet2_1"}


def test_one_instance_runs_requests_one_at_a_time(server):
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: _meet(server.url, "meet1"), range(2)))
    assert [overlap for overlap, _ in answers] == [0, 0]


def test_response_cache_only_where_the_config_enables_it(server):
    body = {"text_input": "Hello", "parameters": {"max_tokens": 4, "temperature": 0}}
    for model in ("cached", "uncached"):
        first = httpx.post(f"{server.url}/v2/models/{model}/generate", json=body, timeout=60).json()
        again = httpx.post(f"{server.url}/v2/models/{model}/generate", json=body, timeout=60).json()
        assert first["text_output"] == again["text_output"]
    metrics = httpx.get(f"{server.url}/metrics").text
    assert 'nv_cache_num_hits_per_model{model="cached",version="1"} 1.0' in metrics
    assert 'nv_cache_num_hits_per_model{model="uncached",version="1"} 0.0' in metrics
    assert 'nv_cache_num_misses_per_model{model="uncached",version="1"} 0.0' in metrics


def test_an_unsupported_key_fails_the_load_naming_it(server):
    index = {m["name"]: m for m in httpx.post(f"{server.url}/v2/repository/index").json()}
    assert index["stateful"]["state"] == "UNAVAILABLE"
    assert "optimization" in index["stateful"]["reason"]
    r = httpx.post(f"{server.url}/v2/repository/models/stateful/load")
    assert r.status_code == 400 and "optimization" in r.json()["error"]


def _add(client, x: int, **sequence):
    tensor = grpcclient.InferInput("X", [1], "INT32")
    tensor.set_data_from_numpy(np.array([x], dtype=np.int32))
    result = client.infer("accumulate", [tensor], **sequence)
    assert result.as_numpy("ACC_OUT") is None                   # the state stays in the server
    return int(result.as_numpy("SUM")[0]), int(result.as_numpy("CORR")[0]), int(result.as_numpy("STARTED")[0])


def test_sequence_batching_with_controls_and_implicit_state(server):
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        assert _add(client, 1, sequence_id=11, sequence_start=True) == (1, 11, 1)
        assert _add(client, 10, sequence_id=22, sequence_start=True) == (10, 22, 1)
        assert _add(client, 2, sequence_id=11) == (3, 11, 0)
        assert _add(client, 5, sequence_id=22, sequence_end=True) == (15, 22, 0)
        assert _add(client, 3, sequence_id=11, sequence_end=True) == (6, 11, 0)
        with pytest.raises(Exception, match="START flag"):
            _add(client, 1, sequence_id=22)                         # sequence 22 has ended
        with pytest.raises(Exception, match="sequence_id"):
            _add(client, 1)
    with ThreadPoolExecutor(4) as pool:                             # requests of one sequence keep their order
        with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
            assert _add(client, 0, sequence_id=33, sequence_start=True)[0] == 0
            sums = sorted(pool.map(lambda x: _add(client, 1, sequence_id=33)[0], range(4)))
    assert sums == [1, 2, 3, 4]
    r = httpx.post(f"{server.url}/v2/models/meet1/infer", json={
        "inputs": [{"name": "X", "datatype": "INT32", "shape": [1], "data": [1]}],
        "parameters": {"sequence_id": 5, "sequence_start": True}})
    assert r.status_code == 400 and "sequence_batching" in r.json()["error"]


def test_a_model_is_not_ready_until_its_warmup_ends(server):
    import threading
    import time

    folder = server.root / "gated"
    loaded: list[int] = []
    loader = threading.Thread(target=lambda: loaded.append(
        httpx.post(f"{server.url}/v2/repository/models/gated/load", timeout=180).status_code))
    loader.start()
    deadline = time.monotonic() + 120
    while not (folder / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (folder / "started").exists()                      # loaded, its warmup waiting for us
    assert httpx.get(f"{server.url}/v2/models/gated/ready").status_code != 200
    r = httpx.post(f"{server.url}/v2/models/gated/infer",
                   json={"inputs": [{"name": "X", "datatype": "INT32", "shape": [1], "data": [1]}]})
    assert r.status_code == 503 and "warming up" in r.json()["error"]
    r = httpx.post(f"{server.url}/v1/chat/completions",       # /v1 asks the same readiness (Engine.get)
                   json={"model": "gated", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 503 and "warming up" in r.json()["error"]["message"]
    assert httpx.get(f"{server.url}/health").status_code == 503
    assert httpx.get(f"{server.url}/v2/health/ready").status_code == 503
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        assert not client.is_model_ready("gated") and not client.is_server_ready()
    (folder / "go").touch()
    loader.join(120)
    assert loaded == [200]
    assert httpx.get(f"{server.url}/v2/models/gated/ready").status_code == 200
    assert httpx.get(f"{server.url}/health").status_code == 200


def _meeting(server, models: tuple[str, str]) -> list[int]:
    import shutil

    folder = server.root.parent / "meeting"
    shutil.rmtree(folder)
    folder.mkdir()

    def call(model: str) -> int:
        r = httpx.post(f"{server.url}/v2/models/{model}/infer", timeout=60,
                       json={"inputs": [{"name": "X", "datatype": "INT32", "shape": [1], "data": [1]}]})
        return r.json()["outputs"][0]["data"][0]

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(call, models))


def test_rate_limiter_resources_keep_two_models_from_running_at_once(server):
    assert _meeting(server, ("limited_a", "free_c")) == [1, 1]        # no shared resource: they run together
    assert _meeting(server, ("limited_a", "limited_b")) == [0, 0]     # both need all of R: they take turns
