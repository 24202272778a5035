"""A careless admin's config over a real server (explicit model control): every key is typed and range-checked
when the config is read, so a bad value refuses the load with a 400 naming the key while the version already
serving keeps serving; a config.pbtxt's parameters are read the same way; a config that names what does not
exist (a backend, built-in weights) is the same 400, not a 503."""
from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import start_server, write_repository

GOOD = {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 4}
BAD_PBTXT = '''name: "tiny-pbtxt"
backend: "transformers"
max_batch_size: 4
parameters { key: "weights" value: { string_value: "builtin:tiny" } }
parameters { key: "dtype" value: { string_value: "float32" } }
parameters { key: "kv_cache_mb" value: { string_value: "x" } }
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {"tiny": GOOD})
    (root / "tiny-pbtxt" / "1").mkdir(parents=True)
    (root / "tiny-pbtxt" / "config.pbtxt").write_text(BAD_PBTXT)
    server = start_server(["--model-repository", str(root), "--model-control-mode", "explicit",
                           "--load-model", "tiny"], root)
    yield server
    server.stop()


def _load(server, config: dict | None = None, model: str = "tiny") -> httpx.Response:
    body = {"parameters": {"config": json.dumps(config)}} if config is not None else {}
    return httpx.post(f"{server.url}/v2/repository/models/{model}/load", json=body, timeout=120)


def _still_serving(server) -> None:
    r = httpx.post(f"{server.url}/v2/models/tiny/generate", json={"text_input": "Hi", "parameters": {"max_tokens": 2}},
                   timeout=60)
    assert r.status_code == 200
    assert httpx.get(f"{server.url}/v2/models/tiny/ready").status_code == 200


@pytest.mark.parametrize("key, value", [
    ("max_batch_size", "x"), ("max_batch_size", 0), ("max_batch_size", -3), ("parameters", "x"),
    ("max_step_tokens", "x"), ("kv_cache_mb", "x"),
    ("prefix_cache_mb", "x"), ("prefix_cache_mb", -1), ("context_length", 0), ("max_queue_size", 1.5),
    ("queue_timeout", "soon"), ("response_cache", "maybe"), ("num_threads", 0), ("prefill_stall", 0.5),
])
def test_a_bad_value_refuses_the_load_naming_the_key(server, key, value):
    r = _load(server, {**GOOD, key: value})
    assert r.status_code == 400 and f"'{key}'" in r.json()["error"]
    _still_serving(server)


@pytest.mark.parametrize("key, value, named", [("backend", "nope", "backend 'nope'"),
                                                ("weights", "builtin:nope", "builtin:nope")])
def test_a_config_naming_what_does_not_exist_is_400(server, key, value, named):
    r = _load(server, {**GOOD, key: value})
    assert r.status_code == 400 and named in r.json()["error"]
    _still_serving(server)


def test_a_python_model_that_fails_to_load_is_400_not_503(server):
    """A `backend: python` config whose model.py is missing fails its load as any other config does."""
    r = _load(server, {"backend": "python"})
    assert r.status_code == 400 and "python backend" in r.json()["error"], r.text
    _still_serving(server)


def test_an_override_that_is_no_json_is_400(server):
    r = httpx.post(f"{server.url}/v2/repository/models/tiny/load", json={"parameters": {"config": "{"}})
    assert r.status_code == 400 and "not JSON" in r.json()["error"]


def test_a_triton_override_s_parameters_are_typed(server):
    override = {"backend": "transformers", "max_batch_size": 4, "model_transaction_policy": {"decoupled": False},
                "parameters": {"weights": {"string_value": "builtin:tiny"},
                               "max_step_tokens": {"string_value": "lots"}}}
    r = _load(server, override)
    assert r.status_code == 400 and "'max_step_tokens'" in r.json()["error"]
    _still_serving(server)


def test_a_pbtxt_parameter_of_the_wrong_type_fails_its_load_by_name(server):
    r = _load(server, model="tiny-pbtxt")
    assert r.status_code == 400 and "'kv_cache_mb'" in r.json()["error"]
    index = {m["name"]: m for m in httpx.post(f"{server.url}/v2/repository/index").json()}
    assert index["tiny-pbtxt"]["state"] == "UNAVAILABLE" and "kv_cache_mb" in index["tiny-pbtxt"]["reason"]


def test_a_good_value_as_text_loads(server):
    assert _load(server, {**GOOD, "max_batch_size": "2", "response_cache": "false"}).status_code == 200
    _still_serving(server)
