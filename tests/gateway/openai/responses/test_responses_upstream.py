"""/v1/responses for a model served by an `openai` upstream: the same conversation path sends it chat
completions (Capabilities.chat_input), and the answer comes back as a Response."""
from __future__ import annotations

import openai
import pytest

from tests.conftest import start_server, write_repository
from tests.gateway.openai.responses.checks import post, stream_events
from tests.fake_upstreams import ECHO_TEXT, echo_server


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    echo = echo_server()
    root = write_repository(tmp_path_factory.mktemp("front"), {
        "echo": {"backend": "openai", "base_url": echo.url, "upstream_model": "echo", "timeout": 30}})
    server = start_server(["--model-repository", str(root)], root)
    yield server
    server.stop()
    echo.stop()


@pytest.fixture(scope="module")
def upstream_client(front):
    return openai.OpenAI(base_url=front.v1, api_key="none", max_retries=0)


def test_whole_and_streamed_through_chat_completions(upstream_client, front):
    response = upstream_client.responses.create(model="echo", instructions="Be brief.", input="Hi")
    assert response.output_text == ECHO_TEXT and response.status == "completed"
    assert response.usage.input_tokens == 5 and response.usage.output_tokens == 7     # the upstream's usage
    with upstream_client.responses.stream(model="echo", input="Hi") as stream:
        assert stream.get_final_response().output_text == ECHO_TEXT
    events = stream_events(front.url, {"model": "echo", "input": "Hi"})
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == ECHO_TEXT
    assert post(front.url, {"model": "echo", "input": "Hi", "previous_response_id": response.id})["output"]


def test_what_needs_constrained_decoding_is_a_400_naming_it(upstream_client):
    fmt = {"type": "json_schema", "name": "x", "schema": {"type": "object"}, "strict": True}
    with pytest.raises(openai.BadRequestError) as err:
        upstream_client.responses.create(model="echo", input="Hi", text={"format": fmt})
    assert err.value.body["param"] == "text.format"
