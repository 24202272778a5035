"""Module fixtures of the gateway tests: tritonclient's clients of the test module's `server` (a `start_triton`
server), for the Triton-face tests; and for the embedding tests, sentence-transformers' own encoding of the default
embedding model (the reference Conch's backend must match) and that model's tokenizer."""
from __future__ import annotations

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conch.engine.weights.minilm import minilm_path


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


@pytest.fixture(scope="module")
def reference():
    """texts -> sentence-transformers' normalized vectors for the same model folder."""
    st = pytest.importorskip("sentence_transformers")
    model = st.SentenceTransformer(str(minilm_path()), device="cpu")
    return lambda texts: model.encode(list(texts), convert_to_numpy=True)


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path())
