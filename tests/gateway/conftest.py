"""tritonclient's clients of the test module's `server` (a `start_triton` server), for the Triton-face tests."""
from __future__ import annotations

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient


@pytest.fixture(scope="module")
def http_client(server):
    c = httpclient.InferenceServerClient(server.url.removeprefix("http://"))
    yield c
    c.close()


@pytest.fixture(scope="module")
def grpc_client(server):
    c = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    yield c
    c.close()
