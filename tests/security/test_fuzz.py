"""Every malformed body is a 4xx, and the keep-alive connection survives it: hypothesis mutates a valid body
per route (hostile values, wrong types, unknown keys, deep nesting, lone surrogates) or sends arbitrary JSON
or bytes, against a real server with the tiny model; after each answer the next request on the same httpx
connection (same local port) must succeed. A few hundred bodies per route here, more under `-m slow`."""
from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import given, strategies as st

from tests.conftest import start_server, write_repository
from tests.security.fuzzing import Mutations, as_json, fuzz_settings, values

EXAMPLES, SLOW_EXAMPLES = 200, 1000
TEMPLATES: dict[str, dict] = {
    "/v1/chat/completions": {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
    "/v1/completions": {"model": "tiny", "prompt": "hi", "max_tokens": 2},
    "/v2/models/tiny/generate": {"text_input": "hi", "parameters": {"max_tokens": 2}},
    "/v2/models/tiny/infer": {"inputs": [
        {"name": "text_input", "datatype": "BYTES", "shape": [1], "data": ["hi"]},
        {"name": "sampling_parameters", "datatype": "BYTES", "shape": [1], "data": ['{"max_tokens": 2}']}]},
    "/v2/repository/index": {"ready": True},
}
# Keys a mutation may set, beside the template's own: the sampling parameters and the usual suspects.
KEYS = ("model", "prompt", "messages", "max_tokens", "max_completion_tokens", "n", "stop", "seed", "temperature",
        "top_p", "top_k", "min_p", "logprobs", "top_logprobs", "logit_bias", "presence_penalty", "frequency_penalty",
        "response_format", "tools", "tool_choice", "stream", "stream_options", "user", "echo", "suffix",
        "text_input", "parameters", "inputs", "outputs", "id", "ready", "role", "content", "name", "datatype",
        "shape", "data", "binary_data_size", "exclude_input_in_output")
# Counts that would make the tiny model generate for long stay out of reach: hostile, never merely large.
COUNTS = st.sampled_from([-(2 ** 63), -1, 0, 1, 2, 2 ** 31, 2 ** 63, 2 ** 64, 10 ** 30, 1.5, "2", None, True, []])
VALUES = values(KEYS, ["\ud800", "\udfff", "", "tiny", "\x00", "a" * 3000, "{{", "<|im_end|>"])
DEEP = st.integers(60, 200).map(lambda depth: json.loads("[" * depth + "]" * depth))


def value_for(key: str):
    if key in ("max_tokens", "max_completion_tokens", "n", "top_logprobs", "best_of"):
        return COUNTS
    return st.one_of(VALUES, DEEP, st.just("\ud800"))


FUZZ = Mutations(TEMPLATES, KEYS, value_for, rounds=4, raw=(as_json(VALUES), st.binary(max_size=64)))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {"tiny": {
        "weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 8, "context_length": 64}})
    server = start_server(["--model-repository", str(root)], root)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=60, limits=httpx.Limits(max_connections=1)) as c:
        yield c


def _port(response: httpx.Response) -> int:
    return response.extensions["network_stream"].get_extra_info("socket").getsockname()[1]


def check(client: httpx.Client, path: str, body: bytes, headers: dict | None = None) -> None:
    r = client.post(path, content=body, headers={"Content-Type": "application/json", **(headers or {})})
    assert r.status_code < 500, (path, body[:300], r.status_code, r.text[:300])
    assert r.status_code in (200, 499) or "error" in r.json(), (path, body[:300], r.text[:300])
    ok = client.get("/v2/health/live")
    assert ok.status_code == 200 and _port(ok) == _port(r), (path, body[:300], "the connection was dropped")


def fuzz_route(client: httpx.Client, path: str, examples: int, derandomize: bool = True,
               fuzz: Mutations = FUZZ) -> None:
    """`examples` of `fuzz`'s bodies for `path`, each checked on the one connection."""
    @fuzz_settings(examples, derandomize)
    @given(body=fuzz.bodies(path))
    def run(body: bytes) -> None:
        check(client, path, body)
    run()


@pytest.mark.parametrize("path", TEMPLATES)
def test_fuzzed_bodies_are_4xx_on_a_surviving_connection(client, path):
    fuzz_route(client, path, EXAMPLES)


@pytest.mark.slow
@pytest.mark.parametrize("path", TEMPLATES)
def test_fuzzed_bodies_at_length(client, path):
    fuzz_route(client, path, SLOW_EXAMPLES, derandomize=False)


def _infer(shape: list, datatype: str = "BYTES", **extra) -> dict:
    return {"inputs": [{"name": "text_input", "datatype": datatype, "shape": shape, **extra}]}


CASES = [
    ("/v1/completions", {"model": "tiny", "prompt": "hi", "max_tokens": 1, "seed": 2 ** 64}),
    ("/v1/completions", {"model": "tiny", "prompt": "hi", "max_tokens": 1, "seed": -(2 ** 63) - 1}),
    ("/v2/models/tiny/generate", {"text_input": "hi", "parameters": {"max_tokens": 1, "seed": 2 ** 64}}),
    ("/v1/completions", {"model": "tiny\ud800", "prompt": "hi", "max_tokens": 1}),
    ("/v1/completions", {"model": "tiny", "prompt": "hi\ud800", "max_tokens": 1}),
    ("/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "\ud800"}]}),
    ("/v2/models/tiny/generate", {"text_input": "hi\ud800"}),
    ("/v2/models/tiny/generate", {"text_input": [["a"], "b"]}),
    ("/v2/models/tiny/generate", {"text_input": json.loads("[" * 63 + '"a"' + "]" * 63)}),
    ("/v2/models/tiny/generate", {"text_input": json.loads("[" * 70 + '"a"' + "]" * 70)}),
    ("/v2/models/tiny/infer", _infer([2 ** 70], data=["hi"])),
    ("/v2/models/tiny/infer", _infer([2] * 65, data=["hi"])),
    ("/v2/repository/index", b"[" * 100_000),
    ("/v1/chat/completions", b"[" * 100_000),
]


@pytest.mark.parametrize(("path", "body"), CASES)
def test_known_malformed_bodies(client, path, body):
    check(client, path, body if isinstance(body, bytes) else json.dumps(body).encode("utf-8", "surrogatepass"))


def test_binary_tensor_with_a_shape_past_int64(client):
    header = json.dumps(_infer([2 ** 32, 2 ** 32], "FP32", parameters={"binary_data_size": 0})).encode()
    check(client, "/v2/models/tiny/infer", header, {"Inference-Header-Content-Length": str(len(header))})
