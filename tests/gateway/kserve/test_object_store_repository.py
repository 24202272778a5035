"""`conch serve --model-repository s3://HOST:PORT/bucket/path` against moto's S3 server on loopback, in poll
mode: the Triton layout uploaded there (config.pbtxt, version folders, an ensemble) serves; a new version
uploaded is served after the poll; a model removed from the bucket is unloaded; the credentials are never in
the log."""
from __future__ import annotations

import os

import httpx
import pytest

from tests.conftest import start_server
from tests.gateway.kserve.test_model_control import ECHO, ECHO_PBTXT, echo
from tests.gateway.kserve.triton_repo import eventually
from tests.object_stores import start_s3

ENSEMBLE = '''name: "twice"
platform: "ensemble"
input [ { name: "x", data_type: TYPE_INT32, dims: [ -1 ] } ]
output [ { name: "y", data_type: TYPE_INT32, dims: [ -1 ] } ]
ensemble_scheduling { step [
  { model_name: "echo", model_version: -1, input_map { key: "x", value: "x" } output_map { key: "y", value: "mid" } },
  { model_name: "echo", model_version: -1, input_map { key: "x", value: "mid" } output_map { key: "y", value: "y" } }
] }
'''


def infer(url: str, model: str) -> tuple[int, list]:
    r = httpx.post(f"{url}/v2/models/{model}/infer",
                   json={"inputs": [{"name": "x", "datatype": "INT32", "shape": [2], "data": [1, 2]}]})
    return r.status_code, r.json()["outputs"][0]["data"] if r.status_code == 200 else r.json()["error"]


@pytest.fixture(scope="module")
def bucket(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("s3")
    store = start_s3(tmp)
    saved = {k: os.environ.get(k) for k in store.env}
    os.environ.update(store.env)
    fs = store.filesystem()
    fs.mkdir("bucket")
    fs.pipe_file("bucket/models/echo/config.pbtxt", ECHO_PBTXT.encode())
    fs.pipe_file("bucket/models/echo/1/model.py", ECHO.format(init="pass", factor=10).encode())
    fs.pipe_file("bucket/models/twice/config.pbtxt", ENSEMBLE.encode())
    fs.pipe_file("bucket/models/twice/1/.keep", b"")
    server = start_server(["--model-repository", store.url("bucket/models"), "--model-control-mode", "poll",
                           "--repository-poll-secs", "0.5"], tmp,
                          env={**store.env, "CONCH_REPOSITORY_CACHE": str(tmp / "mirrors")})
    yield server, fs
    server.stop()
    store.stop()
    for k, v in saved.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def test_the_bucket_serves_and_follows_uploads(bucket):
    server, fs = bucket
    assert echo(server.url) == (200, [10, 20])
    assert infer(server.url, "twice") == (200, [100, 200])
    fs.pipe_file("bucket/models/echo/2/model.py", ECHO.format(init="pass", factor=3).encode())
    assert eventually(lambda: echo(server.url) == (200, [3, 6]))         # version 2, after a poll
    assert infer(server.url, "twice") == (200, [9, 18])
    fs.pipe_file("bucket/models/echo/3/model.py", ECHO.format(init="raise RuntimeError('bad')", factor=1).encode())
    assert eventually(lambda: "failed to load" in str(httpx.post(f"{server.url}/v2/repository/index").json()))
    assert echo(server.url) == (200, [3, 6])                               # a broken version 3 leaves 2 serving


def test_a_model_removed_from_the_bucket_is_unloaded(bucket):
    server, fs = bucket
    fs.rm("bucket/models/twice", recursive=True)
    assert eventually(lambda: httpx.get(f"{server.url}/v2/models/twice/ready").status_code != 200)
    assert "twice" not in str(httpx.post(f"{server.url}/v2/repository/index").json())
    log = server.log.read_text()
    assert "testing" not in log and "AWS_SECRET" not in log
