"""The openai SDK's clients of the SmolLM2 server (tests/conftest.py), for the /v1 tests."""
from __future__ import annotations

import openai
import pytest


@pytest.fixture(scope="module")
def client(smollm2_server):
    return openai.OpenAI(base_url=smollm2_server.v1, api_key="none", max_retries=0)


@pytest.fixture(scope="module")
def aclient(smollm2_server):
    return openai.AsyncOpenAI(base_url=smollm2_server.v1, api_key="none", max_retries=0)
