"""Parses an OTLP/JSON export with the official OpenTelemetry protobuf
definitions (PyPI opentelemetry-proto) and prints what it decoded as JSON.

OTLP/JSON writes trace and span ids as hex, where protobuf's generic JSON
mapping expects base64 for bytes fields: the ids are converted first, as an
OTLP receiver does. Every other field goes through json_format.Parse
unchanged, which rejects unknown fields and wrong types.
"""
import base64
import json
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)


def hex_ids_to_base64(doc):
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        raw = bytes.fromhex(span[key])
                        span[key] = base64.b64encode(raw).decode()
    return doc


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in any_value.array_value.values]
    return getattr(any_value, kind)


def main():
    doc = hex_ids_to_base64(json.load(open(sys.argv[1])))
    req = json_format.Parse(json.dumps(doc), ExportTraceServiceRequest())
    out = {"resource": {}, "spans": []}
    for rs in req.resource_spans:
        for a in rs.resource.attributes:
            out["resource"][a.key] = value_of(a.value)
        for ss in rs.scope_spans:
            for span in ss.spans:
                out["spans"].append(
                    {
                        "name": span.name,
                        "kind": span.kind,
                        "trace_id_len": len(span.trace_id),
                        "span_id_len": len(span.span_id),
                        "trace_id": span.trace_id.hex(),
                        "start": span.start_time_unix_nano,
                        "end": span.end_time_unix_nano,
                        "status_code": span.status.code,
                        "attributes": {a.key: value_of(a.value) for a in span.attributes},
                    }
                )
    json.dump(out, sys.stdout)


main()
