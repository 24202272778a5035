"""Several versions of one model served at once, as the version policy selects (all, latest N, specific):
each reachable by /v2 .../versions/{v}, gRPC model_version and an ensemble step's model_version; a request
naming no version gets the newest. Poll mode retires versions the policy no longer selects, and a broken new
version leaves the serving ones in place."""
from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from tests.gateway.kserve.triton_repo import build_repository, eventually, start_triton

SCALE = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        {init}

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("y", pb_utils.get_input_tensor_by_name(r, "x")
                                                            .as_numpy() * {factor})]) for r in requests]
'''
PBTXT = '''name: "{name}"
backend: "python"
{policy}
input [ {{ name: "x", data_type: TYPE_INT32, dims: [ -1 ] }} ]
output [ {{ name: "y", data_type: TYPE_INT32, dims: [ -1 ] }} ]
'''
PINNED = '''name: "pinned"
platform: "ensemble"
input [ { name: "x", data_type: TYPE_INT32, dims: [ -1 ] } ]
output [ { name: "y", data_type: TYPE_INT32, dims: [ -1 ] } ]
ensemble_scheduling { step [ { model_name: "every" model_version: 1
                               input_map { key: "x" value: "x" } output_map { key: "y" value: "y" } } ] }
'''


def write_model(root: Path, name: str, policy: str, versions: dict[int, int], broken: tuple[int, ...] = ()) -> None:
    """`versions`: version -> the factor that version multiplies its input by."""
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "config.pbtxt").write_text(PBTXT.format(name=name, policy=policy))
    for version, factor in versions.items():
        (root / name / str(version)).mkdir(exist_ok=True)
        init = "raise RuntimeError('broken weights')" if version in broken else "pass"
        (root / name / str(version) / "model.py").write_text(SCALE.format(init=init, factor=factor))


def infer(url: str, model: str, version: str | None = None) -> tuple[int, object]:
    path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
    r = httpx.post(url + path, json={"inputs": [{"name": "x", "datatype": "INT32", "shape": [1], "data": [1]}]})
    body = r.json()
    return r.status_code, (body["model_version"], body["outputs"][0]["data"][0]) if r.status_code == 200 \
        else body["error"]


def ready_versions(url: str, model: str) -> list[str]:
    index = httpx.post(f"{url}/v2/repository/index", json={"ready": True}).json()
    return [m["version"] for m in index if m["name"] == model]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = build_repository(tmp_path_factory.mktemp("repo"), example=False, vllm=False)
    write_model(root, "every", "version_policy: { all: {} }", {1: 10, 2: 100, 3: 1000})
    write_model(root, "latest2", "version_policy: { latest: { num_versions: 2 } }", {1: 10, 2: 100, 3: 1000})
    write_model(root, "some", "version_policy: { specific: { versions: [1, 3] } }", {1: 10, 2: 100, 3: 1000})
    (root / "pinned").mkdir()
    (root / "pinned" / "config.pbtxt").write_text(PINNED)
    server = start_triton(root)
    yield server
    server.stop()


def test_policy_all_serves_every_version(server):
    assert [infer(server.url, "every", v) for v in "123"] == [(200, ("1", 10)), (200, ("2", 100)),
                                                              (200, ("3", 1000))]
    assert infer(server.url, "every") == (200, ("3", 1000))              # no version: the newest
    assert httpx.get(f"{server.url}/v2/models/every").json()["versions"] == ["1", "2", "3"]
    assert ready_versions(server.url, "every") == ["1", "2", "3"]
    for v in "123":
        assert httpx.get(f"{server.url}/v2/models/every/versions/{v}/ready").status_code == 200


def test_latest_and_specific_policies(server):
    assert ready_versions(server.url, "latest2") == ["2", "3"]
    assert infer(server.url, "latest2", "2") == (200, ("2", 100))
    status, error = infer(server.url, "latest2", "1")
    assert status == 404 and "version '1'" in error and "2, 3" in error
    assert ready_versions(server.url, "some") == ["1", "3"]
    assert infer(server.url, "some", "2")[0] == 404
    assert infer(server.url, "some") == (200, ("3", 1000))


def test_grpc_model_version(server):
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        x = grpcclient.InferInput("x", [1], "INT32")
        x.set_data_from_numpy(np.array([2], dtype=np.int32))
        result = client.infer("every", [x], model_version="2")
        assert result.get_response().model_version == "2" and result.as_numpy("y").tolist() == [200]
        assert client.is_model_ready("every", "1") and not client.is_model_ready("every", "9")
        assert client.get_model_metadata("every").versions == ["1", "2", "3"]
        stats = client.get_inference_statistics("every", as_json=True)["model_stats"]
        assert sorted(s["version"] for s in stats) == ["1", "2", "3"]


def test_ensemble_step_pins_a_version(server):
    assert infer(server.url, "pinned")[1][1] == 10                       # version 1 of 'every', not the newest


def test_poll_retires_unselected_versions_and_keeps_them_on_failure(tmp_path):
    root = build_repository(tmp_path, example=False, vllm=False)
    write_model(root, "m", "version_policy: { latest: { num_versions: 2 } }", {1: 10, 2: 100})
    server = start_triton(root, "--model-control-mode", "poll", "--repository-poll-secs", "0.3")
    try:
        assert ready_versions(server.url, "m") == ["1", "2"]
        write_model(root, "m", "version_policy: { latest: { num_versions: 2 } }", {3: 1000})
        assert eventually(lambda: ready_versions(server.url, "m") == ["2", "3"])
        assert infer(server.url, "m", "1")[0] == 404 and infer(server.url, "m", "2") == (200, ("2", 100))
        write_model(root, "m", "version_policy: { latest: { num_versions: 2 } }", {4: 1}, broken=(4,))
        index = lambda: [s for s in httpx.post(f"{server.url}/v2/repository/index").json()  # noqa: E731
                         if s["name"] == "m"]
        assert eventually(lambda: "broken weights" in index()[0]["reason"])
        assert ready_versions(server.url, "m") == ["2", "3"]             # the serving versions stay
        assert infer(server.url, "m") == (200, ("3", 1000))
    finally:
        server.stop()

