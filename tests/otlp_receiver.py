"""Real OTLP trace receivers on loopback for the tracing tests, over HTTP (`start_receiver`) and gRPC
(`start_grpc_receiver`, the collector's TraceService): each decodes every ExportTraceServiceRequest
(opentelemetry-proto) and keeps its spans, flattened with their resource."""
from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass, field
from typing import Callable

import grpc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                        ExportTraceServiceResponse)
from google.protobuf.json_format import MessageToDict


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: str
    attributes: dict
    resource: dict
    start: int
    end: int


@dataclass
class Receiver:
    url: str                      # what --trace-config opentelemetry,url= names
    stop: Callable[[], None]
    spans: list[Span] = field(default_factory=list)

    def of_trace(self, trace_id: str) -> list[Span]:
        return [s for s in list(self.spans) if s.trace_id == trace_id]

    def keep(self, request: ExportTraceServiceRequest) -> None:
        for rs in request.resource_spans:
            resource = _attributes(MessageToDict(rs.resource).get("attributes", []))
            for ss in rs.scope_spans:
                for s in ss.spans:
                    d = MessageToDict(s)
                    self.spans.append(Span(s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(),
                                           d.get("kind", ""), _attributes(d.get("attributes", [])), resource,
                                           s.start_time_unix_nano, s.end_time_unix_nano))


def _value(v: dict):
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    return int(v["intValue"]) if "intValue" in v else None


def _attributes(items: list) -> dict:
    return {a["key"]: _value(a.get("value", {})) for a in items}


def start_receiver() -> Receiver:
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            receiver.keep(request)
            out = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = Receiver(f"http://127.0.0.1:{server.server_address[1]}/v1/traces", server.shutdown)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return receiver


def start_grpc_receiver() -> Receiver:
    class Service(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):
            receiver.keep(request)
            return ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    receiver = Receiver(f"http://127.0.0.1:{port}", lambda: server.stop(None))
    return receiver
