"""Model control is an administrator's act, end to end over HTTP (httpx) and gRPC (tritonclient): a key
without the `admin` role gets 403 / PERMISSION_DENIED for load and unload (config override or not) while it
still lists its models; with keys configured and no admin key the control API is refused to everyone; an
admin's config override may not reach weights outside the repository; a failed load answers a short reason
without a traceback or a server path, and the serving version keeps serving."""
from __future__ import annotations

import json

import grpc
import httpx
import pytest
import tritonclient.grpc as grpcclient
import yaml
from tritonclient.utils import InferenceServerException

from tests.conftest import write_repository
from tests.gateway.kserve.triton_repo import start_triton

TINY = {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 4}
ADMIN, USER = {"Authorization": "Bearer sk-admin"}, {"Authorization": "Bearer sk-user"}
OVERRIDE = '{"weights": "builtin:tiny", "dtype": "float32", "context_length": 64}'


def _start(root, keys: list[dict], *args: str):
    write_repository(root, {"tiny": TINY})
    keys_file = root.parent / f"{root.name}-keys.yaml"
    keys_file.write_text(yaml.safe_dump({"keys": keys}))
    return start_triton(root, "--api-keys-file", str(keys_file), "--model-control-mode", "explicit",
                        "--load-model", "tiny", *args)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    server = _start(root, [{"key": "sk-user"}], "--admin-key", "sk-admin")
    server.root = root
    yield server
    server.stop()


@pytest.fixture(scope="module")
def no_admin(tmp_path_factory):
    server = _start(tmp_path_factory.mktemp("repo"), [{"key": "sk-user"}, {"key": "sk-metrics", "metrics": True}])
    yield server
    server.stop()


def load(server, headers: dict, config: str | None = None, model: str = "tiny") -> httpx.Response:
    body = {"parameters": {"config": config}} if config is not None else None
    return httpx.post(f"{server.url}/v2/repository/models/{model}/load", json=body, headers=headers, timeout=120)


def generates(server) -> bool:
    r = httpx.post(f"{server.url}/v2/models/tiny/generate", headers=USER,
                   json={"text_input": "Hi", "parameters": {"max_tokens": 2}})
    return r.status_code == 200


def test_a_user_key_may_not_load_or_unload_over_http(server):
    with httpx.Client(base_url=server.url, headers=USER, timeout=60) as client:
        for path, body in (("load", None), ("load", {"parameters": {"config": OVERRIDE}}), ("unload", None)):
            r = client.post(f"/v2/repository/models/tiny/{path}", json=body)
            assert r.status_code == 403 and "'admin' role" in r.json()["error"]
        assert client.post("/v2/repository/index").json()[0]["name"] == "tiny"   # same connection, still fine
    assert generates(server)                                                     # nothing was unloaded
    r = httpx.post(f"{server.url}/v2/repository/models/tiny/unload", headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401


def test_a_user_key_may_not_load_or_unload_over_grpc(server):
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        user = {"authorization": "Bearer sk-user"}
        for call in (lambda: client.load_model("tiny", headers=user, config=OVERRIDE),
                     lambda: client.unload_model("tiny", headers=user)):
            with pytest.raises(InferenceServerException) as err:
                call()
            assert err.value.status() == str(grpc.StatusCode.PERMISSION_DENIED)
        assert [m.name for m in client.get_model_repository_index(headers=user).models] == ["tiny"]
        assert client.is_model_ready("tiny", headers=user)
        client.load_model("tiny", headers={"authorization": "Bearer sk-admin"})
    assert generates(server)


def test_an_admin_loads_with_an_override(server):
    assert load(server, ADMIN, OVERRIDE).status_code == 200
    config = httpx.get(f"{server.url}/v2/models/tiny/config", headers=ADMIN).json()
    assert config["parameters"]["context_length"]["string_value"] == "64"
    assert load(server, ADMIN).status_code == 200
    assert generates(server)


def test_an_override_may_not_reach_outside_the_repository(server):
    (server.root / "tiny" / "1" / "outside").symlink_to("/etc")
    for weights in ("/etc", "../../../../../../etc", "tiny/../../../etc", "1/outside",
                    "HuggingFaceTB/SmolLM2-135M-Instruct", str(server.root.parent)):
        for key in ("weights", "tokenizer"):
            override = {"weights": "builtin:tiny", "dtype": "float32", key: weights}
            r = load(server, ADMIN, json.dumps(override))
            assert r.status_code == 400, (weights, r.text)
            message = r.json()["error"]
            assert "inside the model repository" in message and str(server.root) not in message
    assert generates(server)                               # a refused load leaves the serving version alone


def test_a_failed_load_answers_a_short_reason(server):
    folder = server.root / "tiny" / "1"                     # inside the repository, but holds no weights
    r = load(server, ADMIN, f'{{"weights": "{folder}", "dtype": "float32"}}')
    assert r.status_code == 400
    message = r.json()["error"]
    assert message.startswith("failed to load model 'tiny'") and len(message) <= 300
    assert str(server.root) not in message and "Traceback" not in message and "\n" not in message
    index = httpx.post(f"{server.url}/v2/repository/index", headers=USER).json()
    assert index[0]["state"] == "READY" and str(server.root) not in index[0]["reason"]
    assert generates(server)
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        with pytest.raises(InferenceServerException) as err:
            client.load_model("tiny", headers={"authorization": "Bearer sk-admin"},
                              config=f'{{"weights": "{folder}"}}')
        assert str(server.root) not in err.value.message() and "Traceback" not in err.value.message()


def test_with_no_admin_key_the_control_api_is_refused(no_admin):
    for headers in ({"Authorization": "Bearer sk-user"}, {"Authorization": "Bearer sk-metrics"}):
        for path in ("load", "unload"):
            r = httpx.post(f"{no_admin.url}/v2/repository/models/tiny/{path}", headers=headers)
            assert r.status_code == 403 and "no key with the 'admin' role" in r.json()["error"]
    with grpcclient.InferenceServerClient(f"127.0.0.1:{no_admin.grpc_port}") as client:
        with pytest.raises(InferenceServerException) as err:
            client.unload_model("tiny", headers={"authorization": "Bearer sk-user"})
        assert err.value.status() == str(grpc.StatusCode.PERMISSION_DENIED)
    assert generates(no_admin)
