"""A real OTLP/HTTP trace receiver for Junction's tracing tests, built on the
official OTLP protobuf definitions (PyPI `opentelemetry-proto`).

POST /v1/traces takes an ExportTraceServiceRequest (protobuf, optionally
gzip) and keeps every span; GET /spans answers them as JSON, one object per
span: trace_id, span_id, parent_span_id (hex), name, kind (the OTLP enum
name), attributes (key -> value), status code, and the resource's
service.name. POST /reset forgets them.

Binds 127.0.0.1 only (a loopback test server); prints `READY
http://127.0.0.1:<port>` once listening. Run with the py-oauth venv's python.
"""

import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

SPANS = []
LOCK = threading.Lock()


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def decode(body):
    req = ExportTraceServiceRequest()
    req.ParseFromString(body)
    out = []
    for rs in req.resource_spans:
        resource = {a.key: value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    {
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent_span_id": s.parent_span_id.hex(),
                        "name": s.name,
                        "kind": Span.SpanKind.Name(s.kind),
                        "attributes": {a.key: value(a.value) for a in s.attributes},
                        "status": Status.StatusCode.Name(s.status.code),
                        "service": resource.get("service.name"),
                    }
                )
    return out


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body, content_type="application/json"):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.path == "/reset":
            with LOCK:
                SPANS.clear()
            return self.answer(200, b"{}")
        if self.path != "/v1/traces":
            return self.answer(404, b"{}")
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        if self.headers.get("content-type") != "application/x-protobuf":
            return self.answer(415, b"{}")
        spans = decode(body)
        with LOCK:
            SPANS.extend(spans)
        self.answer(
            200,
            ExportTraceServiceResponse().SerializeToString(),
            "application/x-protobuf",
        )

    def do_GET(self):
        if self.path != "/spans":
            return self.answer(404, b"{}")
        with LOCK:
            body = json.dumps(SPANS).encode()
        self.answer(200, body)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"READY http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
