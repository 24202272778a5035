"""`--trace-config mode=opentelemetry` against a real OTLP/HTTP receiver on loopback (tests/otlp_receiver.py),
exported by the SDK's own OTLP exporter: a client's `traceparent` parents the server's spans on every face and
comes back on the response; the engine's span carries the GenAI conventions' attributes and its phases; an
unsampled parent is honoured; no prompt or completion text is exported; each MCP tool call the Responses
loop runs against a real MCP server is a span of the request, with no argument or output recorded; over
OTLP/gRPC (a receiver on the collector's TraceService), an ensemble's steps are spans of the request, no header
is recorded, and a request without a parent is sampled by `rate`."""
from __future__ import annotations

import secrets

import grpc
import httpx
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from conch.engine.weights import DEFAULT_MODEL_ID as MODEL
from tests.fake_upstreams import TRACEPARENTS, echo_server
from tests.conftest import free_port, start_server, write_repository
from tests.gateway.kserve.inflight_repo import build_inflight
from tests.gateway.kserve.triton_repo import eventually
from conch.gateway.telemetry import TraceConfig
from tests.otlp_receiver import start_grpc_receiver, start_receiver

PROMPT = "a secret prompt about zebras"


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    upstream = echo_server()
    write_repository(root, {"tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 4},
                            "echo": {"backend": "openai", "base_url": upstream.url, "upstream_model": "echo-up",
                                     "timeout": 30}})
    receiver, grpc_port = start_receiver(), free_port()
    server = start_server(["--model-repository", str(root), "--grpc-port", str(grpc_port),
                           "--trace-config", "mode=opentelemetry", "--trace-config", "rate=1",
                           "--trace-config", f"opentelemetry,url={receiver.url}",
                           "--trace-config", "opentelemetry,bsp_schedule_delay=100",
                           "--trace-config", "opentelemetry,resource=deployment.environment=test"], root)
    server.grpc_port = grpc_port
    yield server, receiver
    server.stop()
    receiver.stop()
    upstream.stop()


def parent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01"


def spans_of(receiver, trace_id: str, names: set[str]):
    assert eventually(lambda: names <= {s.name for s in receiver.of_trace(trace_id)}), \
        [s.name for s in receiver.of_trace(trace_id)]
    return {s.name: s for s in receiver.of_trace(trace_id)}


def test_chat_spans_follow_the_client_and_the_conventions(traced):
    server, receiver = traced
    trace_id, span_id, traceparent = parent()
    r = httpx.post(f"{server.v1}/chat/completions", headers={"traceparent": traceparent},
                   json={"model": "tiny", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 4})
    assert r.status_code == 200
    assert r.headers["traceparent"].split("-")[1] == trace_id          # traceparent out: the same trace
    spans = spans_of(receiver, trace_id, {"POST /v1/chat/completions", "chat tiny", "queue", "prefill", "decode"})
    root, chat = spans["POST /v1/chat/completions"], spans["chat tiny"]
    assert [s.name for s in receiver.of_trace(trace_id)].count("POST /v1/chat/completions") == 1   # one server span
    assert root.parent_id == span_id and root.kind == "SPAN_KIND_SERVER"
    assert r.headers["traceparent"].split("-")[2] == root.span_id
    assert chat.parent_id == root.span_id
    assert {spans[p].parent_id for p in ("queue", "prefill", "decode")} == {chat.span_id}
    a = chat.attributes
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "tiny"
    usage = r.json()["usage"]
    assert a["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
    assert a["gen_ai.usage.output_tokens"] == usage["completion_tokens"]
    assert a["gen_ai.response.finish_reasons"] == [r.json()["choices"][0]["finish_reason"]]
    assert "gen_ai.usage.cache_read.input_tokens" in a and a["gen_ai.request.max_tokens"] == 4
    assert root.resource["service.name"] == "conch" and root.resource["deployment.environment"] == "test"
    text = r.json()["choices"][0]["message"]["content"]
    for s in receiver.of_trace(trace_id):                                 # no prompt, no completion
        assert not any(PROMPT in str(v) or (text and text in str(v)) for v in s.attributes.values())


def test_messages_and_v2_generate_are_parented_too(traced):
    server, receiver = traced
    trace_id, span_id, traceparent = parent()
    r = httpx.post(f"{server.url}/v1/messages", headers={"traceparent": traceparent},
                   json={"model": "tiny", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200 and r.headers["traceparent"].split("-")[1] == trace_id
    spans = spans_of(receiver, trace_id, {"POST /v1/messages", "chat tiny"})
    assert spans["POST /v1/messages"].parent_id == span_id

    trace_id, span_id, traceparent = parent()
    r = httpx.post(f"{server.url}/v2/models/tiny/generate", headers={"traceparent": traceparent},
                   json={"text_input": "hi", "parameters": {"max_tokens": 3}})
    assert r.status_code == 200
    spans = spans_of(receiver, trace_id, {"POST /v2/models/tiny/generate", "text_completion tiny"})
    assert spans["text_completion tiny"].parent_id == spans["POST /v2/models/tiny/generate"].span_id


def test_the_upstream_call_is_a_client_span_and_gets_the_traceparent(traced):
    server, receiver = traced
    trace_id, span_id, traceparent = parent()
    r = httpx.post(f"{server.v1}/chat/completions", headers={"traceparent": traceparent},
                   json={"model": "echo", "messages": [{"role": "user", "content": PROMPT}]})
    assert r.status_code == 200
    spans = spans_of(receiver, trace_id, {"POST /v1/chat/completions", "chat echo", "chat echo-up"})   # (the
    upstream = spans["chat echo-up"]                            # server span can reach the receiver last)
    assert upstream.kind == "SPAN_KIND_CLIENT" and upstream.parent_id == spans["POST /v1/chat/completions"].span_id
    assert upstream.attributes["gen_ai.request.model"] == "echo-up"
    assert upstream.attributes["gen_ai.usage.output_tokens"] == 7
    sent = [t for t in TRACEPARENTS if t and t.split("-")[1] == trace_id]
    assert len(sent) == 1 and sent[0].split("-")[2] == upstream.span_id     # traceparent out, upstream


def test_grpc_reads_and_returns_traceparent(traced):
    server, receiver = traced
    trace_id, span_id, traceparent = parent()
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        _, call = stub.ModelReady.with_call(service_pb2.ModelReadyRequest(name="tiny"),
                                            metadata=(("traceparent", traceparent),))
        returned = dict(call.initial_metadata())["traceparent"]
    assert returned.split("-")[1] == trace_id
    spans = spans_of(receiver, trace_id, {"grpc ModelReady"})
    assert spans["grpc ModelReady"].parent_id == span_id and spans["grpc ModelReady"].span_id == returned.split("-")[2]


def test_an_unsampled_parent_is_honoured(traced):
    server, receiver = traced
    trace_id, span_id, _ = parent()
    r = httpx.post(f"{server.v1}/completions", headers={"traceparent": f"00-{trace_id}-{span_id}-00"},
                   json={"model": "tiny", "prompt": "hi", "max_tokens": 2})
    assert r.status_code == 200
    marker, marker_span, marker_parent = parent()                   # a sampled request after it: once it is
    httpx.post(f"{server.v1}/completions", headers={"traceparent": marker_parent},   # exported, the first
               json={"model": "tiny", "prompt": "hi", "max_tokens": 2})           # would have been too
    spans_of(receiver, marker, {"text_completion tiny"})
    assert receiver.of_trace(trace_id) == []


def test_trace_mode_is_reported_and_fixed(traced):
    server, _ = traced
    assert httpx.get(f"{server.url}/v2/trace/setting").json()["trace_mode"] == "opentelemetry"
    r = httpx.post(f"{server.url}/v2/trace/setting", json={"trace_mode": "triton"})
    assert r.status_code == 400 and "trace_mode" in r.text


def test_trace_config_reads_tritons_names():
    config = TraceConfig.parse(["mode=opentelemetry", "rate=10", "opentelemetry,url=collector:4318/v1/traces",
                                "opentelemetry,resource=service.name=mine", "opentelemetry,bsp_max_queue_size=64",
                                "opentelemetry,bsp_schedule_delay=200", "opentelemetry,protocol=grpc"])
    assert config.opentelemetry and config.rate == 10 and config.endpoint == "http://collector:4318/v1/traces"
    assert config.resource == {"service.name": "mine"} and config.protocol == "grpc"
    assert config.bsp == {"max_queue_size": 64, "schedule_delay_millis": 200}
    assert not TraceConfig.parse(["mode=opentelemetry", "level=OFF"]).opentelemetry


@pytest.mark.parametrize("entry", ["rate=0", "mode=zipkin", "opentelemetry,bsp_bogus=1", "jaeger,url=x", "nonsense"])
def test_trace_config_refuses_by_name(entry):
    with pytest.raises(ValueError, match="--trace-config"):
        TraceConfig.parse([entry])


ADDEND = "What is 2 plus 3? Use the add tool."
SUM = {"type": "json_schema", "name": "answer", "strict": True, "schema": {
    "type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"], "additionalProperties": False}}


@pytest.fixture(scope="module")
def mcp_traced(tmp_path_factory, tools_http):
    """SmolLM2 calling the real test MCP server's `add` (tests/mcp_servers/tools_server.py) from /v1/responses,
    spans exported to its own receiver."""
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        MODEL: {"weights": "builtin:smollm2", "dtype": "float32", "max_batch_size": 2}})
    receiver = start_receiver()
    server = start_server(["--model-repository", str(root), "--mcp-allow-origin", tools_http.origin,
                           "--mcp-loop-timeout", "900",                      # 2 shared CPUs
                           "--trace-config", "mode=opentelemetry", "--trace-config", "rate=1",
                           "--trace-config", f"opentelemetry,url={receiver.url}",
                           "--trace-config", "opentelemetry,bsp_schedule_delay=100"], root)
    yield server, receiver
    server.stop()
    receiver.stop()


def test_each_mcp_call_is_a_span_of_the_request(mcp_traced, tools_http):
    server, receiver = mcp_traced
    trace_id, span_id, traceparent = parent()
    tool = {"type": "mcp", "server_label": "calc", "server_url": tools_http.url, "allowed_tools": ["add"],
            "require_approval": "never"}
    r = httpx.post(f"{server.v1}/responses", headers={"traceparent": traceparent}, timeout=600, json={
        "model": MODEL, "input": ADDEND, "tools": [tool], "tool_choice": {"type": "mcp", "server_label": "calc",
                                                                          "name": "add"},
        "max_tool_calls": 1, "max_output_tokens": 48, "temperature": 0, "text": {"format": SUM}})
    assert r.status_code == 200, r.text
    calls = [item for item in r.json()["output"] if item["type"] == "mcp_call"]
    assert len(calls) == 1 and calls[0]["status"] == "completed", r.json()
    spans = spans_of(receiver, trace_id, {"POST /v1/responses", "execute_tool add", f"chat {MODEL}"})
    tool_span, root = spans["execute_tool add"], spans["POST /v1/responses"]
    assert root.parent_id == span_id
    assert tool_span.parent_id == root.span_id and tool_span.kind == "SPAN_KIND_INTERNAL"
    assert tool_span.attributes == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add",
                                    "gen_ai.tool.type": "mcp", "mcp.method.name": "tools/call",
                                    "mcp.server.label": "calc"}        # no arguments, no output
    turns = [s for s in receiver.of_trace(trace_id) if s.name == f"chat {MODEL}"]
    assert len(turns) == 2 and {t.parent_id for t in turns} == {root.span_id}   # the call's turn, the answer's
    assert calls[0]["output"] and all(calls[0]["arguments"] not in str(v) for s in receiver.of_trace(trace_id)
                                  for v in s.attributes.values())


@pytest.fixture(scope="module")
def grpc_traced(tmp_path_factory):
    """The inflight_batcher_llm repository, exporting over OTLP/gRPC, sampling one request in a billion."""
    root = build_inflight(tmp_path_factory.mktemp("inflight"))
    receiver = start_grpc_receiver()
    server = start_server(["--model-repository", str(root), "--trace-config", "mode=opentelemetry",
                           "--trace-config", "rate=1000000000", "--trace-config", "opentelemetry,protocol=grpc",
                           "--trace-config", f"opentelemetry,url={receiver.url}",
                           "--trace-config", "opentelemetry,bsp_schedule_delay=100"], root)
    yield server, receiver
    server.stop()
    receiver.stop()


def generate(server, headers: dict) -> httpx.Response:
    r = httpx.post(f"{server.url}/v2/models/ensemble/generate", headers=headers, timeout=120,
                   json={"text_input": PROMPT, "parameters": {"max_tokens": 4}})
    assert r.status_code == 200, r.text
    return r


def test_otlp_grpc_carries_the_ensembles_steps_and_no_secret(grpc_traced):
    server, receiver = grpc_traced
    trace_id, span_id, traceparent = parent()
    secret = "Bearer sk-otel-never-exported"
    generate(server, {"traceparent": traceparent, "Authorization": secret})
    root = "POST /v2/models/ensemble/generate"
    steps = {"infer preprocessing", "infer postprocessing", "text_completion tensorrt_llm"}
    spans = spans_of(receiver, trace_id, {root, "infer ensemble", *steps})
    assert spans[root].parent_id == span_id
    assert {spans[s].parent_id for s in steps} <= {spans[root].span_id, spans["infer ensemble"].span_id}
    llm = spans["text_completion tensorrt_llm"].attributes          # the LLM step: a generation of its own
    assert llm["gen_ai.request.model"] == "tensorrt_llm" and llm["gen_ai.usage.output_tokens"] > 0
    for s in receiver.of_trace(trace_id):
        assert not any(secret in str(v) or PROMPT in str(v) for v in (*s.attributes.values(), *s.resource.values()))


def test_rate_samples_requests_without_a_parent(grpc_traced):
    server, receiver = grpc_traced
    before = {s.trace_id for s in receiver.spans}
    generate(server, {})                                         # no parent: one in a billion is sampled
    marker, _, traceparent = parent()
    generate(server, {"traceparent": traceparent})               # a sampled parent decides for its request
    spans_of(receiver, marker, {"POST /v2/models/ensemble/generate"})
    assert {s.trace_id for s in receiver.spans} - before == {marker}
