"""Every face, fuzzed from its wire schema and by mutations of valid bodies: 0 answers 5xx, and each error is in
the face's own shape (OpenAI's {"error": {message, type, param, code}} on /v1, Anthropic's {"type": "error",
"error": {type, message}} on /v1/messages, {"error": "..."} on /v2).

The bodies are tests/security/fuzzing.py's: mutations of a valid body per route, whose keys are the route's own
schema fields (so the values reach its validators) and the usual suspects, and arbitrary JSON. One
module-scoped tiny server, small token counts; a few hundred bodies per route here, more under `-m slow`.
tests/security/test_fuzz.py fuzzes the older routes' connection handling."""
from __future__ import annotations

import httpx
import pytest
from hypothesis import given, strategies as st

from conch.gateway.anthropic.schemas import MessagesRequest, Tool as AnthropicTool
from conch.gateway.openai.responses.schemas import ResponsesRequest
from conch.gateway.openai.responses.wire_tools import CustomTool, FunctionTool, McpTool
from conch.gateway.openai.schemas.chat import ChatCompletionRequest
from conch.gateway.openai.schemas.completions import CompletionRequest
from conch.gateway.openai.schemas.embeddings import EmbeddingRequest
from conch.gateway.openai.schemas.items import RESPONSE_ITEMS
from tests.conftest import start_server, write_repository
from tests.security.fuzzing import Mutations, as_json, fuzz_settings, values

EXAMPLES, SLOW_EXAMPLES = 120, 2000
CONVERSATION = "{conversation}"          # replaced by a conversation the fixture creates
MESSAGE = [{"role": "user", "content": "hi"}]
TEMPLATES: dict[str, dict] = {
    "/v1/responses": {"model": "tiny", "max_output_tokens": 2, "input": [
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"}],
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}},
                  {"type": "custom", "name": "c", "format": {"type": "grammar", "syntax": "regex",
                                                             "definition": "[a-z]{1,3}"}}],
        "tool_choice": "auto", "text": {"format": {"type": "text"}}},
    "/v1/responses/input_tokens": {"model": "tiny", "input": [{"type": "message", "role": "user", "content": "hi"}],
                                   "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]},
    "/v1/responses/compact": {"model": "tiny", "max_output_tokens": 2, "input": [
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]}]},
    "/v1/conversations": {"items": [{"type": "message", "role": "user", "content": "hi"}], "metadata": {"k": "v"}},
    f"/v1/conversations/{CONVERSATION}": {"metadata": {"k": "v"}},
    f"/v1/conversations/{CONVERSATION}/items": {"items": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]}]},
    "/v1/chat/completions": {"model": "tiny", "messages": MESSAGE, "max_tokens": 2,
                             "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
    "/v1/completions": {"model": "tiny", "prompt": "hi", "max_tokens": 2},
    "/v1/embeddings": {"model": "minilm", "input": ["hi", "there"]},
    "/v1/messages": {"model": "tiny", "max_tokens": 2, "messages": MESSAGE, "system": "be brief",
                     "tools": [{"name": "t", "input_schema": {"type": "object"}}]},
    "/v1/messages/count_tokens": {"model": "tiny", "messages": MESSAGE},
    "/v2/models/tiny/generate": {"text_input": "hi", "parameters": {"max_tokens": 2}},
    "/v2/models/tiny/generate_stream": {"text_input": "hi", "parameters": {"max_tokens": 2}},
}
_SCHEMA_FIELDS = {name for model in (ResponsesRequest, ChatCompletionRequest, CompletionRequest, EmbeddingRequest,
                                     MessagesRequest, AnthropicTool, FunctionTool, CustomTool, McpTool,
                                     *RESPONSE_ITEMS.values())
                  for name in model.model_fields}
KEYS = tuple(sorted(_SCHEMA_FIELDS | {"type", "format", "syntax", "definition", "schema", "json_schema", "error",
                                      "guided_grammar", "parameters", "config"}))
COUNTS = st.sampled_from([-(2 ** 63), -1, 0, 1, 2, 2 ** 31, 2 ** 64, 1.5, "2", None, True, []])
VALUES = values(KEYS, ["message", "function", "custom", "mcp", "grammar", "text", "lark", "json_schema", "user",
                       "assistant", "tiny", "<|im_end|>", "start: start", "\x00", "a" * 3000, "required", "auto"])


def value_for(key: str):
    if "tokens" in key or key in ("n", "top_logprobs", "max_tool_calls", "limit"):
        return COUNTS
    return VALUES


FUZZ = Mutations(TEMPLATES, KEYS, value_for, raw=(as_json(VALUES),))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 8, "context_length": 64},
        "minilm": {"backend": "embedding", "weights": "builtin:minilm", "dtype": "float32"}})
    server = start_server(["--model-repository", str(root)], root)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=300) as c:      # a hang, not a slow compile on a shared CPU
        yield c


@pytest.fixture(scope="module")
def conversation(client) -> str:
    r = client.post("/v1/conversations", json={})
    assert r.status_code == 200, r.text
    return r.json()["id"]


def check_shape(path: str, r: httpx.Response, body: bytes) -> None:
    assert r.status_code < 500, (path, body[:300], r.status_code, r.text[:300])
    if r.status_code < 400:
        return
    error = r.json()
    if path.startswith("/v1/messages"):
        assert error["type"] == "error" and set(error["error"]) == {"type", "message"}, (path, body[:300], error)
    elif path.startswith("/v1"):
        assert set(error) == {"error"} and set(error["error"]) == {"message", "type", "param", "code"}, \
            (path, body[:300], error)
    else:
        assert set(error) == {"error"} and isinstance(error["error"], str), (path, body[:300], error)


def fuzz_route(client: httpx.Client, conversation: str, path: str, examples: int, derandomize: bool = True,
               fuzz: Mutations = FUZZ) -> None:
    """`examples` of `fuzz`'s bodies for `path` (its conversation placeholder filled), each checked."""
    url = path.replace(CONVERSATION, conversation)

    @fuzz_settings(examples, derandomize)
    @given(body=fuzz.bodies(path))
    def run(body: bytes) -> None:
        check_shape(path, client.post(url, content=body, headers={"Content-Type": "application/json"}), body)
    run()


@pytest.mark.parametrize("path", TEMPLATES)
def test_fuzzed_bodies_are_never_5xx_and_errors_keep_the_face_shape(client, conversation, path):
    fuzz_route(client, conversation, path, EXAMPLES)


@pytest.mark.slow
@pytest.mark.parametrize("path", TEMPLATES)
def test_fuzzed_bodies_at_length(client, conversation, path):
    fuzz_route(client, conversation, path, SLOW_EXAMPLES, derandomize=False)


@pytest.mark.parametrize("path", ["/v1/responses/{id}", "/v1/responses/{id}/input_items",
                                  "/v1/conversations/{conversation}", "/v1/conversations/{conversation}/items"])
def test_stored_records_read_back_after_the_fuzz(client, conversation, path):
    """What the fuzz stored reads back: no record it left makes a GET fail."""
    made = client.post("/v1/responses", json={"model": "tiny", "input": "hi", "max_output_tokens": 2})
    assert made.status_code == 200, made.text
    r = client.get(path.format(id=made.json()["id"], conversation=conversation))
    assert r.status_code == 200, r.text[:300]
