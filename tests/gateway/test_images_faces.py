"""Images on every chat-like face, through the real openai and anthropic SDKs against a real server: a
text-only model refuses an image with a 400 that names the part and says the model has no vision."""
from __future__ import annotations

import base64

import anthropic
import openai
import pytest

from tests.conftest import start_server, write_repository

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40
DATA_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    write_repository(root, {"tiny": {"weights": "builtin:tiny", "dtype": "float32"}})
    server = start_server(["--model-repository", str(root)], root)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0)


@pytest.fixture(scope="module")
def claude(server):
    client = anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0)
    yield client
    client.close()


def test_a_text_only_model_refuses_an_image_on_chat(oai):
    with pytest.raises(openai.BadRequestError) as refused:
        oai.chat.completions.create(model="tiny", max_tokens=2, messages=[
            {"role": "system", "content": "look"},
            {"role": "user", "content": [{"type": "text", "text": "what is it?"},
                                         {"type": "image_url", "image_url": {"url": DATA_URL}}]}])
    error = refused.value.body
    assert error["param"] == "messages.1.content.1" and "no vision" in error["message"]


def test_a_text_only_model_refuses_an_image_on_responses(oai):
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="tiny", max_output_tokens=2, input=[
            {"role": "user", "content": [{"type": "input_text", "text": "what is it?"},
                                         {"type": "input_image", "image_url": DATA_URL, "detail": "auto"}]}])
    error = refused.value.body
    assert error["param"] == "input.0.content.1" and "no vision" in error["message"]


def test_a_text_only_model_refuses_an_image_on_messages(claude):
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.create(model="tiny", max_tokens=2, messages=[{"role": "user", "content": [
            {"type": "text", "text": "what is it?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": base64.b64encode(PNG).decode()}}]}])
    assert "no vision" in refused.value.message and "messages.0.content.1" in refused.value.message


def test_other_parts_are_still_named(oai):
    with pytest.raises(openai.BadRequestError, match="input_audio"):
        oai.chat.completions.create(model="tiny", max_tokens=2, messages=[{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}])
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="tiny", max_output_tokens=2, input=[
            {"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}])
    assert refused.value.body["param"] == "input.0.content.0.file_id"
