"""`conch serve` with no repository (what `make run` runs): the default chat model and the default embedding
model side by side, behind the same API keys."""
from __future__ import annotations

import httpx
import openai
import pytest

from conch.engine.weights import DEFAULT_MODEL_ID
from conch.engine.weights.minilm import EMBEDDING_MODEL_ID
from tests.conftest import start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    logs = tmp_path_factory.mktemp("logs")
    server = start_server(["--api-key", "sk-test"], logs, env={"HF_HUB_OFFLINE": "1"})
    yield server
    server.stop()


def test_models_lists_both_defaults(server):
    client = openai.OpenAI(base_url=server.v1, api_key="sk-test", max_retries=0)
    assert {DEFAULT_MODEL_ID, EMBEDDING_MODEL_ID} <= {m.id for m in client.models.list().data}
    out = client.embeddings.create(model=EMBEDDING_MODEL_ID, input=["a", "b"])
    assert len(out.data) == 2 and len(out.data[0].embedding) == 384


def test_embeddings_need_the_key(server):
    r = httpx.post(f"{server.v1}/embeddings", json={"model": EMBEDDING_MODEL_ID, "input": "hi"})
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "invalid_api_key"
