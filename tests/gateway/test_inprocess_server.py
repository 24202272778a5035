"""The in-process API (conch.gateway.server), used as tritonserver's Python API is: the inflight_batcher_llm
repository Conch serves on CPU, its ensemble answering `infer(inputs={"text_input": [[query]], "max_tokens":
...})` with no HTTP server; a decoupled model yields several responses; errors are Conch's, by name."""
from __future__ import annotations

import numpy as np
import pytest

from conch.engine.errors import InvalidRequest, ModelNotFound
from conch.gateway import server as tritonserver
from tests.gateway.kserve.inflight_repo import build_inflight


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = build_inflight(tmp_path_factory.mktemp("inflight"))
    server = tritonserver.Server(tritonserver.Options(model_repository=root, log_info=True))
    server.start(wait_until_ready=True)
    yield server
    server.stop()


def test_the_ensemble_answers_as_tritonserver_does(server):
    model = server.model("ensemble")
    assert model.ready() and server.ready()
    responses = list(model.infer(inputs={"text_input": [["What is Ray?"]],
                                         "max_tokens": np.array([[8]], dtype=np.int32)}))
    assert len(responses) == 1 and responses[0].final
    text = responses[0].outputs["text_output"]
    assert isinstance(text, np.ndarray) and isinstance(text.to_string_array().reshape(-1)[0], str)
    assert server.models()["ensemble"]["state"] == "READY"


def test_a_decoupled_model_streams_several_responses(server):
    responses = list(server.model("tensorrt_llm_bls").infer(
        inputs={"text_input": [["hello"]], "max_tokens": [[6]], "stream": [[True]]}))
    assert len(responses) > 1 and responses[-1].final and not responses[0].final


def test_errors_are_named(server):
    with pytest.raises(ModelNotFound):
        server.model("nope").infer(inputs={})
    with pytest.raises(InvalidRequest, match="text_input"):
        list(server.model("ensemble").infer(inputs={"max_tokens": [[4]]}))
