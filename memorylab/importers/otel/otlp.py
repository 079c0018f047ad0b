"""OTLP trace data, as the official ``opentelemetry-proto`` messages decode it, read into plain spans.

An exporter sends an ``ExportTraceServiceRequest`` as binary protobuf or as OTLP JSON (protobuf's JSON
mapping, but for trace and span ids written in hex and enums as integers); the Collector's file
exporter writes one such JSON object a line. Both are parsed by ``opentelemetry-proto`` into the
same message and read here into ``Span`` records: ids in lowercase hex, times in Unix nanoseconds,
attributes as Python values (an array as a list, a key-value list as a dict, bytes as hex).
"""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from ...errors import OtlpRequestError

ID_FIELDS = ("traceId", "spanId", "parentSpanId")
STATUS = {0: "unset", 1: "ok", 2: "error"}
KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}



@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: str
    start: int
    end: int
    status: str
    status_message: str
    attributes: dict
    service: str | None = None
    scope: str | None = None
    events: list = field(default_factory=list)


def _request_class():
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    return ExportTraceServiceRequest


def spans_from_protobuf(body: bytes) -> list[Span]:
    """The spans of a binary protobuf ExportTraceServiceRequest."""
    from google.protobuf.message import DecodeError

    try:
        request = _request_class().FromString(body)
    except DecodeError as error:
        raise OtlpRequestError(f"not a protobuf ExportTraceServiceRequest ({error})") from None
    return _spans(request)


def spans_from_json(value) -> list[Span]:
    """The spans of an ExportTraceServiceRequest in OTLP JSON, already parsed by ``json``."""
    from google.protobuf import json_format

    if not isinstance(value, dict):
        raise OtlpRequestError(f"expected an OTLP JSON object with 'resourceSpans', got {type(value).__name__}")
    try:
        value = _ids_as_base64(value)
    except RecursionError:
        raise OtlpRequestError("not an OTLP JSON ExportTraceServiceRequest (nested too deeply to read)") from None
    try:
        request = json_format.ParseDict(value, _request_class()(), ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as error:
        raise OtlpRequestError(f"not an OTLP JSON ExportTraceServiceRequest ({error})") from None
    return _spans(request)


def _ids_as_base64(value):
    """OTLP JSON writes trace and span ids in hex where protobuf's JSON mapping reads base64."""
    if isinstance(value, list):
        return [_ids_as_base64(item) for item in value]
    if not isinstance(value, dict):
        return value
    return {key: _hex_to_base64(item, key) if key in ID_FIELDS else _ids_as_base64(item)
            for key, item in value.items()}


def _hex_to_base64(text, key):
    if not isinstance(text, str):
        raise OtlpRequestError(f"{key} must be a hex string, got {type(text).__name__}")
    try:
        return base64.b64encode(bytes.fromhex(text)).decode("ascii")
    except ValueError:
        raise OtlpRequestError(f"{key} {text[:40]!r} is not hex") from None


def _spans(request) -> list[Span]:
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        service = resource.get("service.name")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(_span(span, service if isinstance(service, str) else None, scope_spans.scope.name))
    return spans


def _span(span, service, scope) -> Span:
    if len(span.trace_id) != 16 or len(span.span_id) != 8:
        raise OtlpRequestError(f"span {span.name!r} has a trace id of {len(span.trace_id)} bytes and a span id of "
                              f"{len(span.span_id)}: OTLP ids are 16 and 8 bytes")
    return Span(
        trace_id=span.trace_id.hex(), span_id=span.span_id.hex(), parent_id=span.parent_span_id.hex(),
        name=span.name, kind=KINDS.get(span.kind, str(span.kind)), start=span.start_time_unix_nano,
        end=span.end_time_unix_nano, status=STATUS.get(span.status.code, str(span.status.code)),
        status_message=span.status.message, attributes=_attributes(span.attributes), service=service,
        scope=scope or None,
        events=[{"name": event.name, "time_unix_nano": event.time_unix_nano,
                 "attributes": _attributes(event.attributes)} for event in span.events],
    )


def _attributes(key_values) -> dict:
    return {item.key: _value(item.value) for item in key_values}


def _value(any_value):
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(any_value, kind)
    if kind == "array_value":
        return [_value(item) for item in value.values]
    if kind == "kvlist_value":
        return _attributes(value.values)
    if kind == "bytes_value":
        return binascii.hexlify(value).decode("ascii")
    return value
