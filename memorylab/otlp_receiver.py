"""``memorylab collect``: an OTLP/HTTP trace receiver that writes the LLM conversations it hears into a store.

Any agent instrumented with OpenTelemetry points its OTLP/HTTP exporter at ``/v1/traces`` here. A
request is an ``ExportTraceServiceRequest`` in binary protobuf or OTLP JSON, gzipped or not; it is
decoded whole before anything is kept, so one the OTLP specification calls bad is answered 400 (it
cannot be decoded), 413 (its body, or what it inflates to, is over ``max_body``) or 415 (neither
protobuf nor JSON), with a ``google.rpc.Status``, and changes nothing.

Spans are held by trace until their trace has been quiet for ``settle`` seconds (an exporter sends a
trace's spans in several requests, children before parents, and retries may repeat them), then the
settled traces are placed as ``importers.otel.sessions`` describes and written by the import writer,
in one transaction. The trees of the sessions written stay in memory, and a session stored before
is read back once, so a conversation goes on across requests, traces and restarts.
"""
from __future__ import annotations

import json
import sys
import threading
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .errors import MemoryLabError, OtlpRequestError, StoreError
from .importers.otel import AGENT_ID
from .importers.otel.otlp import spans_from_json, spans_from_protobuf
from .importers.otel.sessions import OtelSessions, SessionState
from .importers.otel.tree import digest
from .importers.writer import write_sessions

MAX_BODY = 20 * 1024 * 1024
"""The largest request body, after inflating, that is read (the OTLP specification's recommended limit)."""
SETTLE_SECONDS = 1.0
MAX_PENDING_SPANS = 200_000
"""Spans held unwritten at most: a request beyond that is answered 503, which exporters retry later."""
PATH = "/v1/traces"
PROTOBUF, JSON = "application/x-protobuf", "application/json"


@dataclass
class CollectStats:
    """What a collector has taken in so far."""

    requests: int = 0
    refused: int = 0
    spans: int = 0
    llm_calls: int = 0
    messages_added: int = 0
    overlays_added: int = 0
    write_failures: int = 0
    rejected_spans: int = 0


def decode_request(body: bytes, content_type: str | None, content_encoding: str | None = None,
                   max_body: int = MAX_BODY):
    """The spans of one OTLP/HTTP request body; an OtlpRequestError with the status to answer when it
    is not one memorylab can read."""
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "gzip":
        body = _inflated(body, max_body)
    elif encoding != "identity":
        raise OtlpRequestError(f"Content-Encoding {encoding!r} is not supported: send gzip or none", 415)
    media = (content_type or "").split(";")[0].strip().lower()
    if media == PROTOBUF:
        return spans_from_protobuf(body)
    if media == JSON:
        try:
            value = json.loads(body)
        except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
            raise OtlpRequestError(f"the body is not JSON ({error})") from None
        return spans_from_json(value)
    raise OtlpRequestError(f"Content-Type {content_type!r} is not OTLP: send {PROTOBUF} or {JSON}", 415)


def _inflated(body, max_body):
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, max_body + 1)
    except zlib.error as error:
        raise OtlpRequestError(f"the body is not gzip ({error})") from None
    if len(data) > max_body:
        raise OtlpRequestError(f"the body inflates to more than {max_body:,} bytes, the most this collector "
                               "reads; send smaller batches (the exporter's max_export_batch_size)", 413)
    if not inflater.eof:
        raise OtlpRequestError("the gzip body ends before its end of stream")
    return data


class TraceCollector:
    """Spans received, held by trace until they settle, then written into ``store`` (see the module)."""

    def __init__(self, store, *, agent_id=AGENT_ID, tenant_id="default", settle=SETTLE_SECONDS,
                 max_body=MAX_BODY, max_pending=MAX_PENDING_SPANS, source="otlp"):
        self.store, self.agent_id, self.tenant_id = store, agent_id, tenant_id
        self.settle, self.max_body, self.max_pending, self.source = settle, max_body, max_pending, source
        self.sessions = OtelSessions(seed=self._stored_state)
        self.stats = CollectStats()
        self._pending: dict[str, list] = {}
        self._held = 0
        self._heard: dict[str, float] = {}  # trace id -> when its latest span arrived
        self._lock = threading.Lock()
        self._writing = threading.Lock()
        self.rejections: list[str] = []

    def receive(self, body: bytes, content_type, content_encoding=None) -> int:
        """Take one request's spans (how many); a request that cannot be read raises and leaves nothing."""
        spans = decode_request(body, content_type, content_encoding, self.max_body)
        now = time.monotonic()
        with self._lock:
            if self._held and self._held + len(spans) > self.max_pending:
                raise OtlpRequestError(f"{self._held:,} spans wait to be written; send these again shortly", 503)
            self._held += len(spans)
            self.stats.requests += 1
            self.stats.spans += len(spans)
            for span in spans:
                self._pending.setdefault(span.trace_id, []).append(span)
                self._heard[span.trace_id] = now
        return len(spans)

    def refused(self):
        with self._lock:
            self.stats.refused += 1

    def pending_spans(self) -> int:
        with self._lock:
            return self._held

    def flush(self, everything=False):
        """Write the traces quiet for ``settle`` seconds (every held trace when ``everything``); the
        import report, or None when none had settled. A failed write keeps the spans for the next flush."""
        with self._writing:
            spans = self._take_settled(everything)
            if not spans:
                return None
            try:
                return self._write(spans)
            finally:
                with self._lock:
                    self._held -= len(spans)

    def _write(self, spans):
        try:
            return self._write_batch(spans)
        except (StoreError, OSError, KeyboardInterrupt):
            self._put_back(spans)  # the store's trouble, not the spans': they wait for the next flush
            raise
        except MemoryLabError:
            return self._write_traces_alone(spans)

    def _write_batch(self, spans):
        try:
            report = write_sessions(self.store, self.sessions.batch(spans), source=self.source, format_name="otel",
                                    agent_id=self.agent_id, tenant_id=self.tenant_id)
        except BaseException:
            self.sessions.forget(list(self.sessions.states))  # read back from the store when next needed
            self.stats.write_failures += 1
            raise
        self.stats.llm_calls += self.sessions.last_batch_calls
        self.stats.messages_added += report.messages_added
        self.stats.overlays_added += report.overlays_added
        return report

    def _write_traces_alone(self, spans):
        """A batch the writer refused for what a span holds: each trace is written on its own, and a
        trace refused alone is dropped (``stats.rejected_spans``) with its reason, the others kept."""
        by_trace: dict[str, list] = {}
        for span in sorted(spans, key=lambda s: s.start):
            by_trace.setdefault(span.trace_id, []).append(span)
        report, traces = None, list(by_trace.items())
        for number, (trace_id, trace_spans) in enumerate(traces):
            try:
                report = self._write_batch(trace_spans)
            except (StoreError, OSError):
                self._put_back([span for _, unwritten in traces[number:] for span in unwritten])
                raise
            except MemoryLabError as error:
                self.stats.rejected_spans += len(trace_spans)
                self.rejections.append(f"trace {trace_id}: {error}")
        return report

    def _take_settled(self, everything):
        cutoff = time.monotonic() - self.settle
        with self._lock:
            settled = [t for t, heard in self._heard.items() if everything or heard <= cutoff]
            spans = [span for trace_id in settled for span in self._pending.pop(trace_id)]
            for trace_id in settled:
                del self._heard[trace_id]
        return spans

    def _put_back(self, spans):
        with self._lock:
            self._held += len(spans)
            for span in spans:
                self._pending.setdefault(span.trace_id, []).append(span)
                self._heard.setdefault(span.trace_id, time.monotonic())

    def _stored_state(self, session_id) -> SessionState | None:
        """What the store holds of a session this collector has not written yet (a restart's)."""
        pk = self.store.sessions.find(self.tenant_id, self.agent_id, session_id)
        if pk is None:
            return None
        storage = self.store.sessions.storage(pk)
        state = SessionState(titled=True)
        for message in storage.all():
            otel = (message.get("metadata") or {}).get("otel") or {}
            state.tree.know_message(message["id"], message.get("parent_id"), digest(message),
                                    otel.get("start_unix_nano") if isinstance(otel, dict) else None)
        for overlay in storage.overlays():
            state.tree.know_overlay(overlay["from_id"], overlay["to_id"], overlay.get("metadata"))
        metadata = storage.info()["metadata"]
        state.facts = dict(metadata.get("otel") or {})
        state.spans = list(metadata.get("otel_spans") or [])
        state.span_ids = {kept.get("span_id") for kept in state.spans}
        return state


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # exporters keep their connection open between requests
    collector: TraceCollector

    def do_POST(self):
        if self.path.split("?")[0] != PATH:
            return self._answer(404, f"no such path {self.path!r}: OTLP traces go to {PATH}")
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return self._answer(411, "a request needs a Content-Length")
        if length > self.collector.max_body:
            self.close_connection = True  # its body is left unread
            return self._answer(413, f"the body is {length:,} bytes, over the {self.collector.max_body:,} this "
                                     "collector reads; send smaller batches")
        body = self.rfile.read(length)
        try:
            self.collector.receive(body, self.headers.get("Content-Type"), self.headers.get("Content-Encoding"))
        except OtlpRequestError as error:
            return self._answer(error.status, str(error), {"Retry-After": "1"} if error.status == 503 else {})
        self._send(200, b"")  # an empty ExportTraceServiceResponse, in either encoding

    def do_GET(self):
        self._answer(405, f"send OTLP traces with POST to {PATH}")

    do_PUT = do_DELETE = do_GET

    def _answer(self, status, message, headers=()):
        """A refusal, as the specification asks: a google.rpc.Status holding only its message."""
        self.collector.refused()
        if self._media() == JSON:
            return self._send(status, json.dumps({"message": message}).encode(), headers)
        text = message.encode("utf-8")
        self._send(status, b"\x12" + _varint(len(text)) + text, headers)  # field 2 (message), length-delimited

    def _send(self, status, body, headers=()):
        self.send_response(status)
        for name, value in dict(headers).items():
            self.send_header(name, value)
        self.send_header("Content-Type", JSON if self._media() == JSON else PROTOBUF)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _media(self):
        return (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()

    def log_message(self, format, *args):
        pass  # a line a request would drown what collect prints


def _varint(number):
    out = bytearray()
    while True:
        byte, number = number & 0x7F, number >> 7
        out.append(byte | (0x80 if number else 0))
        if not number:
            return bytes(out)


@contextmanager
def serving(collector: TraceCollector, host="127.0.0.1", port=4318, on_flush=None, on_error=None):
    """Serve ``collector`` over OTLP/HTTP until the block ends, flushing what settles as it goes;
    yields the server (``server.server_address`` is where it listens). At the end every held span is written."""
    handler = type("Handler", (_Handler,), {"collector": collector})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    stop = threading.Event()
    threads = [threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True),
               threading.Thread(target=_flush_until, args=(collector, stop, on_flush, on_error), daemon=True)]
    for thread in threads:
        thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        stop.set()
        threads[1].join()
        server.server_close()
        report = collector.flush(everything=True)
        if report is not None and on_flush:
            on_flush(report)


def _flush_until(collector, stop, on_flush, on_error):
    while not stop.wait(min(collector.settle / 4, 0.25)):
        try:
            report = collector.flush()
        except Exception as error:  # kept for the next flush: a locked database passes
            (on_error or _print_error)(error)
            continue
        if report is not None and on_flush:
            on_flush(report)


def _print_error(error):
    print(f"memorylab collect: a write failed, its spans are kept for the next one: {error}", file=sys.stderr)
