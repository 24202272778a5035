"""API keys on the Triton faces, end to end with tritonclient.http, tritonclient.grpc and raw httpx: health and
server metadata stay open; model routes and RPCs want a key (401 / UNAUTHENTICATED), hide the models a key
may not use (404 / NOT_FOUND, and left out of listings) and enforce its limits (429 / RESOURCE_EXHAUSTED)."""
from __future__ import annotations

import queue

import httpx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import yaml
from tritonclient.utils import InferenceServerException

from tests.conftest import write_repository
from tests.gateway.grpc.test_grpc_service import llm_inputs
from tests.gateway.kserve.triton_repo import start_triton

TINY = {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 4}
KEYS = [{"key": "sk-all"}, {"key": "sk-tiny", "models": ["tiny"]},
        {"key": "sk-rpm", "models": ["tiny"], "rpm": 1}, {"key": "sk-tpm", "models": ["tiny"], "tpm": 5}]
ALL, TINY_ONLY = {"Authorization": "Bearer sk-all"}, {"Authorization": "Bearer sk-tiny"}
GRPC_TINY_ONLY = {"authorization": "Bearer sk-tiny"}         # gRPC metadata keys are lower case
GENERATE = {"text_input": "Hello", "parameters": {"max_tokens": 2}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {"tiny": TINY, "other": TINY})
    keys = root.parent / "keys.yaml"
    keys.write_text(yaml.safe_dump({"keys": KEYS}))
    server = start_triton(root, "--api-keys-file", str(keys))
    yield server
    server.stop()


def test_http_health_and_server_metadata_stay_open(server, http_client):
    assert http_client.is_server_live() and http_client.is_server_ready()
    assert http_client.get_server_metadata()["name"] == "conch"
    assert httpx.get(f"{server.url}/v2/models/tiny").status_code == 401


def test_http_generate_needs_a_key(server):
    for headers in ({}, {"Authorization": "Bearer sk-wrong"}):
        for suffix in ("generate", "generate_stream"):
            r = httpx.post(f"{server.url}/v2/models/tiny/{suffix}", json=GENERATE, headers=headers)
            assert r.status_code == 401 and "API key" in r.json()["error"]
    r = httpx.post(f"{server.url}/v2/models/tiny/generate", json=GENERATE, headers=TINY_ONLY)
    assert r.status_code == 200 and r.json()["text_output"].startswith("Hello")


def test_http_a_model_the_key_may_not_use_is_not_found(server):
    refused = httpx.post(f"{server.url}/v2/models/other/generate", json=GENERATE, headers=TINY_ONLY)
    assert refused.status_code == 404 and isinstance(refused.json()["error"], str)
    assert httpx.post(f"{server.url}/v2/models/other/generate", json=GENERATE, headers=ALL).status_code == 200


def test_tritonclient_http_with_and_without_the_key(http_client):
    with pytest.raises(InferenceServerException) as err:
        http_client.get_model_metadata("tiny")
    assert err.value.status() == "401"
    with pytest.raises(InferenceServerException) as err:
        http_client.infer("tiny", llm_inputs(httpclient, "Hello", {"max_tokens": 2}))
    assert err.value.status() == "401"
    assert http_client.get_model_metadata("tiny", headers=TINY_ONLY)["name"] == "tiny"
    result = http_client.infer("tiny", llm_inputs(httpclient, "Hello", {"max_tokens": 2}), headers=TINY_ONLY)
    assert result.as_numpy("text_output")[0].startswith(b"Hello")
    assert http_client.is_model_ready("tiny", headers=TINY_ONLY)
    assert not http_client.is_model_ready("other", headers=TINY_ONLY)
    assert not http_client.is_model_ready("tiny")


def test_http_listings_show_only_the_keys_models(http_client):
    def names(headers):
        index = {m["name"] for m in http_client.get_model_repository_index(headers=headers)}
        stats = {m["name"] for m in http_client.get_inference_statistics(headers=headers)["model_stats"]}
        return index, stats
    assert names(ALL) == ({"tiny", "other"}, {"tiny", "other"})
    assert names(TINY_ONLY) == ({"tiny"}, {"tiny"})


def test_grpc_health_open_model_rpcs_need_a_key(grpc_client):
    assert grpc_client.is_server_live() and grpc_client.is_server_ready()
    assert grpc_client.get_server_metadata().name == "conch"
    for call in (lambda: grpc_client.get_model_metadata("tiny"),
                 lambda: grpc_client.infer("tiny", llm_inputs(grpcclient, "Hello", {"max_tokens": 2})),
                 lambda: grpc_client.get_model_repository_index(headers={"authorization": "Bearer sk-wrong"})):
        with pytest.raises(InferenceServerException) as err:
            call()
        assert err.value.status() == "StatusCode.UNAUTHENTICATED" and "API key" in err.value.message()


def test_grpc_with_the_key(grpc_client):
    assert grpc_client.get_model_metadata("tiny", headers=GRPC_TINY_ONLY).name == "tiny"
    result = grpc_client.infer("tiny", llm_inputs(grpcclient, "Hello", {"max_tokens": 2}), headers=GRPC_TINY_ONLY)
    assert result.as_numpy("text_output")[0].startswith(b"Hello")
    with pytest.raises(InferenceServerException) as err:
        grpc_client.infer("other", llm_inputs(grpcclient, "Hello", {"max_tokens": 2}), headers=GRPC_TINY_ONLY)
    assert err.value.status() == "StatusCode.NOT_FOUND"
    assert grpc_client.is_model_ready("tiny", headers=GRPC_TINY_ONLY)
    assert not grpc_client.is_model_ready("other", headers=GRPC_TINY_ONLY)
    assert {m.name for m in grpc_client.get_model_repository_index(headers=GRPC_TINY_ONLY).models} == {"tiny"}


def test_grpc_stream_requests_are_checked(grpc_client):
    for headers, expect_error in ((None, True), (GRPC_TINY_ONLY, False)):
        results: queue.Queue = queue.Queue()
        grpc_client.start_stream(callback=lambda result, error, results=results: results.put((result, error)),
                                 headers=headers)
        try:
            grpc_client.async_stream_infer("tiny", llm_inputs(grpcclient, "Hello", {"max_tokens": 1}))
            _, error = results.get(timeout=60)
        finally:
            grpc_client.stop_stream()
        assert (error is not None) == expect_error
        if expect_error:
            assert "API key" in error.message()


def test_grpc_limits_are_resource_exhausted(grpc_client):
    rpm = {"authorization": "Bearer sk-rpm"}
    grpc_client.get_model_metadata("tiny", headers=rpm)                     # rpm 1: the one request
    with pytest.raises(InferenceServerException) as err:
        grpc_client.get_model_metadata("tiny", headers=rpm)
    assert err.value.status() == "StatusCode.RESOURCE_EXHAUSTED" and "RPM" in err.value.message()
    tpm = {"authorization": "Bearer sk-tpm"}                                 # tpm 5: one request spends more
    grpc_client.infer("tiny", llm_inputs(grpcclient, "Hello there", {"max_tokens": 8, "ignore_eos": True}),
                      headers=tpm)
    with pytest.raises(InferenceServerException) as err:
        grpc_client.infer("tiny", llm_inputs(grpcclient, "Hello", {"max_tokens": 1}), headers=tpm)
    assert err.value.status() == "StatusCode.RESOURCE_EXHAUSTED" and "TPM" in err.value.message()


def test_log_trace_and_shared_memory_changes_need_the_admin_role(server):
    assert httpx.get(f"{server.url}/v2/logging").status_code == 401
    assert httpx.get(f"{server.url}/v2/logging", headers=ALL).json()["log_info"] is True
    for path, body in (("/v2/logging", {"log_info": False}), ("/v2/trace/setting", {"trace_rate": "5"}),
                       ("/v2/systemsharedmemory/region/r/register", {"key": "/x", "byte_size": 8}),
                       ("/v2/systemsharedmemory/unregister", {})):
        assert httpx.post(f"{server.url}{path}", json=body, headers=ALL).status_code == 403, path
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        assert client.get_log_settings(headers={"authorization": "Bearer sk-all"}, as_json=True)["settings"]
        with pytest.raises(InferenceServerException, match="admin"):
            client.update_log_settings({"log_info": False}, headers={"authorization": "Bearer sk-all"})
