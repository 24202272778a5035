"""One SmolLM2 server for the Anthropic face's modules (package scope: three modules, one model load), behind an
API key (the anthropic SDK and ChatAnthropic send it as x-api-key) with Claude's model names aliased to it."""
from __future__ import annotations

import anthropic
import pytest

from conch.engine.weights import DEFAULT_MODEL_ID
from tests.conftest import start_server, write_repository

KEY = "sk-conch-anthropic"
MODEL = DEFAULT_MODEL_ID


@pytest.fixture(scope="package")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    write_repository(root, {MODEL: {"weights": "builtin:smollm2", "dtype": "float32", "max_batch_size": 16}})
    server = start_server(["--model-repository", str(root), "--api-key", KEY,
                           "--model-alias", f"claude-*={MODEL}"], root)
    yield server
    server.stop()


@pytest.fixture(scope="package")
def client(server):
    c = anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0)
    yield c
    c.close()
