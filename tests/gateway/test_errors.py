"""The one error table (gateway/errors.py): every engine error has a row, and its status gives each face's
answer -- OpenAI's error type, Anthropic's error type, KServe's body and the gRPC status code -- so HTTP and
gRPC cannot drift apart (an upstream timeout is DEADLINE_EXCEEDED, not INTERNAL). One real server checks an
upstream failure on /v1 and over gRPC."""
from __future__ import annotations

import inspect

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from conch.engine import errors
from conch.gateway.anthropic.errors import anthropic_body
from conch.gateway.errors import ERRORS, face_of, kserve_body, openai_body, to_api_error
from conch.gateway.grpc.convert import status_of
from tests.conftest import free_port, write_repository
from tests.gateway.kserve.triton_repo import start_triton

S = grpc.StatusCode
# engine error -> (status, OpenAI type, Anthropic type, gRPC code)
EXPECTED = {
    errors.InvalidRequest: (400, "invalid_request_error", "invalid_request_error", S.INVALID_ARGUMENT),
    errors.ContextLengthExceeded: (400, "invalid_request_error", "invalid_request_error", S.INVALID_ARGUMENT),
    errors.ModelNotFound: (404, "invalid_request_error", "not_found_error", S.NOT_FOUND),
    errors.ModelNotReady: (503, "service_unavailable", "overloaded_error", S.UNAVAILABLE),
    errors.Overloaded: (503, "service_unavailable", "overloaded_error", S.UNAVAILABLE),
    errors.InferenceError: (500, "internal_error", "api_error", S.INTERNAL),
    errors.BackendUnavailable: (503, "service_unavailable", "overloaded_error", S.UNAVAILABLE),
    errors.ModelCodeFailed: (400, "invalid_request_error", "invalid_request_error", S.INVALID_ARGUMENT),
    errors.UpstreamError: (502, "upstream_error", "api_error", S.UNAVAILABLE),
    errors.UpstreamTimeout: (504, "upstream_error", "api_error", S.DEADLINE_EXCEEDED),
    errors.UpstreamRateLimited: (429, "rate_limit_exceeded", "rate_limit_error", S.RESOURCE_EXHAUSTED),
}
ENGINE_ERRORS = [cls for _, cls in inspect.getmembers(errors, inspect.isclass)
                 if issubclass(cls, errors.EngineError) and cls is not errors.EngineError]


def test_every_engine_error_has_a_row():
    assert set(ENGINE_ERRORS) <= set(ERRORS) and set(ENGINE_ERRORS) == set(EXPECTED)


@pytest.mark.parametrize("cls", ENGINE_ERRORS, ids=lambda c: c.__name__)
def test_an_engine_error_through_every_face(cls):
    status, openai_type, anthropic_type, code = EXPECTED[cls]
    exc = cls("went wrong") if not issubclass(cls, errors.Overloaded) else cls("went wrong", retry_after=2)
    err = to_api_error(exc)
    assert err.status == status and err.message == "went wrong"
    assert openai_body(err)["error"]["type"] == openai_type
    assert anthropic_body(err) == {"type": "error", "error": {"type": anthropic_type, "message": "went wrong"}}
    assert kserve_body(err) == {"error": "went wrong"}
    assert status_of(exc) == (code, "went wrong")
    assert ("Retry-After" in err.headers) == (status in (429, 503))


def test_each_path_answers_in_its_faces_shape():
    assert face_of("/v1/messages/count_tokens").body is anthropic_body
    assert face_of("/v1/chat/completions").body is openai_body
    assert face_of("/v2/models/m/infer").body is kserve_body


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {"gone": {
        "backend": "openai", "upstream_model": "tiny", "timeout": 30,
        "base_url": f"http://127.0.0.1:{free_port()}/v1"}})             # nothing listens there
    server = start_triton(root)
    yield server
    server.stop()


def test_an_upstream_failure_is_502_on_v1_and_unavailable_over_grpc(server):
    r = httpx.post(f"{server.v1}/chat/completions", timeout=60,
                   json={"model": "gone", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    assert r.status_code == 502 and r.json()["error"]["type"] == "upstream_error"
    text = grpcclient.InferInput("text_input", [1], "BYTES")
    text.set_data_from_numpy(np.array([b"hi"], dtype=np.object_))
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client, \
            pytest.raises(InferenceServerException) as failed:
        client.infer("gone", [text])
    assert failed.value.status() == "StatusCode.UNAVAILABLE"               # INTERNAL before the one table
