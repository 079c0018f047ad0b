"""``memorylab collect``: OTLP/HTTP trace data received live and written as conversations.

Agents here are the real OpenTelemetry SDK exporting with the real OTLP/HTTP exporter
(``opentelemetry-exporter-otlp-proto-http``) into a running collector; the conversation they trace
is ``tests/otel_agent.py``'s, whose file import (tests/contract/test_import_otel.py) is the tree
every way of sending it must give.
"""
import gzip
import json
import random
import signal
import threading
import time
import urllib.error
import urllib.request

import pytest
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

from memorylab import Session, Store
from memorylab.importers import import_source
from memorylab.otlp_receiver import TraceCollector, serving
from tests.helpers import database_rows, free_port, memorylab_process
from tests.otel_agent import (
    SESSION,
    SUMMARY,
    openinference_agent,
    otlp_json_line,
    run_conversation,
    synthetic_calls,
    tracer_provider,
    tree,
    written,
)


@pytest.fixture(scope="module")
def spans():
    return sorted(run_conversation(openinference_agent, tracer_provider()), key=lambda s: s.start_time)


def endpoint(server):
    host, port = server.server_address[:2]
    return f"http://{host}:{port}/v1/traces"


def post(url, body, content_type="application/x-protobuf", **headers):
    """(status, the message of the google.rpc.Status refusing it, or None) of one POST."""
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type, **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, None
    except urllib.error.HTTPError as error:
        answer = error.read()
        if error.headers["Content-Type"] == "application/json":
            return error.code, json.loads(answer)["message"]
        return error.code, Status.FromString(answer).message


def imported_tree(store, spans, tmp_path):
    """The tree the file import of ``spans`` gives, under an agent of its own."""
    import_source(store, written(tmp_path / "expected.jsonl", spans), agent_id="from-file")
    return tree(store, agent_id="from-file")


def test_an_agent_exporting_to_collect_gives_its_branch_and_its_compaction(store, tmp_path):
    collector = TraceCollector(store, settle=0.2)
    with serving(collector, port=0) as server:
        provider = tracer_provider(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint(server)),
                                                      schedule_delay_millis=50))
        spans = run_conversation(openinference_agent, provider)
        provider.shutdown()
        deadline = time.monotonic() + 10
        while (collector.stats.spans < len(spans) or collector.pending_spans()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert collector.stats.spans == len(spans) and collector.pending_spans() == 0  # written while serving
    session = Session.open(store, SESSION, agent_id="otel")
    assert len(session.get_leaves()) == 2
    overlay, = session.get_compactions()
    assert overlay["summary"] == SUMMARY
    assert session.info["metadata"]["source"]["format"] == "otel"
    assert (collector.stats.llm_calls, collector.stats.messages_added, collector.stats.refused) == (8, 17, 0)
    assert tree(store) == imported_tree(store, spans, tmp_path)


def test_spans_out_of_order_repeated_and_split_give_the_same_tree(store, tmp_path, spans):
    shuffled = random.Random(7).sample(list(spans), len(spans))
    collector = TraceCollector(store, settle=0.3)
    with serving(collector, port=0) as server:
        url = endpoint(server)
        for number, start in enumerate(range(0, len(shuffled), 2)):
            batch = shuffled[start:start + 2]
            protobuf = encode_spans(batch).SerializeToString()
            sent = [(protobuf, "application/x-protobuf", {}),
                    (otlp_json_line(batch).encode(), "application/json", {}),
                    (gzip.compress(protobuf), "application/x-protobuf", {"Content-Encoding": "gzip"})][number % 3]
            for _ in range(2):  # an exporter's retry
                assert post(url, sent[0], sent[1], **sent[2])[0] == 200
    assert collector.stats.spans == 2 * len(spans)
    assert tree(store) == imported_tree(store, spans, tmp_path)


def test_a_session_goes_on_in_a_collector_started_again(store, tmp_path, spans):
    compaction = next(i for i, s in enumerate(spans) if s.attributes.get("llm.input_messages.1.message.content")
                      == SUMMARY)
    for part in (spans[:compaction], spans[compaction:compaction + 1], spans[compaction + 1:]):
        collector = TraceCollector(store, settle=0)  # a new one each time: what it knows is read back from the store
        collector.receive(encode_spans(part).SerializeToString(), "application/x-protobuf")
        collector.flush(everything=True)
    assert tree(store) == imported_tree(store, spans, tmp_path)


def test_a_malformed_or_oversized_request_gets_a_4xx_and_changes_nothing(store, store_target, spans):
    good = encode_spans(spans).SerializeToString()
    collector = TraceCollector(store, settle=0, max_body=len(good) + 10)
    before = database_rows(store_target)
    with serving(collector, port=0) as server:
        url = endpoint(server)
        refused = [
            (post(url, b"\x0a\xff\xff\xff"), 400),  # a field longer than the body
            (post(url, b"{\"resourceSpans\": [", "application/json"), 400),
            (post(url, json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "00", "spanId": "01"}]}]}]})
                  .encode(), "application/json"), 400),  # ids of the wrong length
            (post(url, json.dumps({"resourceSpans": "none"}).encode(), "application/json"), 400),
            (post(url, good, "text/plain"), 415),
            (post(url, good + b"\x00" * 100), 413),
            (post(url, gzip.compress(good + bytes(100))[:-8], "application/x-protobuf", **{"Content-Encoding": "gzip"}),
             413),
            (post(url, gzip.compress(good)[:40], "application/x-protobuf", **{"Content-Encoding": "gzip"}), 400),
            (post(url.replace("/v1/traces", "/v1/logs"), good), 404),
        ]
        assert [status for (status, _), _ in refused] == [expected for _, expected in refused]
        assert refused[1][0][1].startswith("the body is not JSON") and "413" not in refused[5][0][1]
        assert all(message for (_, message), _ in refused)
    assert (collector.stats.spans, collector.stats.refused, collector.pending_spans()) == (0, len(refused), 0)
    assert database_rows(store_target) == before


def test_twenty_concurrent_exporters_lose_no_span(store):
    exporters, conversations, calls = 20, 3, 20
    collector = TraceCollector(store, settle=0.2)
    with serving(collector, port=0) as server:
        def export(number):
            provider = tracer_provider()
            for conversation in range(conversations):
                synthetic_calls(provider.get_tracer("load"), f"agent{number}-c{conversation}", calls)
            made = provider.memory.get_finished_spans()
            exporter = OTLPSpanExporter(endpoint=endpoint(server))
            results.extend(exporter.export(made[i:i + 16]) for i in range(0, len(made), 16))
            exporter.shutdown()

        results = []
        threads = [threading.Thread(target=export, args=(n,)) for n in range(exporters)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert set(results) == {SpanExportResult.SUCCESS}
    total = exporters * conversations * calls
    assert (collector.stats.spans, collector.stats.llm_calls) == (total, total)
    answers = [m for row in store.sessions.list(agent_id="otel")
               for m in Session.open(store, row["session_id"], agent_id="otel").storage.all()
               if m["role"] == "assistant"]
    assert len(answers) == len({m["metadata"]["otel"]["span_id"] for m in answers}) == total


def test_the_collect_command_serves_until_interrupted(store_target, spans):
    port = free_port()
    process = memorylab_process("--db", str(store_target), "collect", "--port", str(port), "--settle", "0.1",
                                env={"PYTHONUNBUFFERED": "1"})
    try:
        assert "OTLP/HTTP traces at http://127.0.0.1:" in process.stderr.readline()
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")
        assert exporter.export(list(spans)) == SpanExportResult.SUCCESS
        assert process.stdout.readline().startswith("wrote 17 messages and 1 overlays into 1 session(s): chat-42")
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert f"{len(spans)} span(s), 8 LLM call(s), 17 messages added, 0 request(s) refused" in err
    with Store(store_target) as store:
        assert len(Session.open(store, SESSION, agent_id="otel").get_compactions()) == 1


def test_a_trace_the_writer_refuses_is_dropped_alone_and_said_why(store):
    provider = tracer_provider()
    tracer = provider.get_tracer("t")
    synthetic_calls(tracer, "good", 2)
    with tracer.start_as_current_span("chat", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.conversation.id": "unstorable",
            "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "\\ud800"}]}]'}):
        pass  # a lone surrogate: JSON holds it, UTF-8 cannot
    synthetic_calls(tracer, "two\nlines", 1)  # no id memorylab stores: a digest of it is
    collector = TraceCollector(store, settle=0)
    collector.receive(encode_spans(provider.memory.get_finished_spans()).SerializeToString(), "application/x-protobuf")
    collector.flush(everything=True)
    assert (collector.stats.rejected_spans, collector.pending_spans()) == (1, 0)
    assert "unpaired surrogate" in collector.rejections[0]
    stored = {row["session_id"]: row["message_count"] for row in store.sessions.list(agent_id="otel")}
    assert stored.pop("good") == 4 and list(stored.values()) == [2]
    assert next(iter(stored)).startswith("conversation-")


def test_a_collector_behind_on_its_writes_answers_503_to_be_tried_again(store, spans):
    collector = TraceCollector(store, settle=60, max_pending=len(spans))
    with serving(collector, port=0) as server:
        body = encode_spans(spans).SerializeToString()
        assert post(endpoint(server), body)[0] == 200
        status, message = post(endpoint(server), body)
        assert (status, collector.pending_spans()) == (503, len(spans))
        assert "send these again shortly" in message
        collector.flush(everything=True)
        assert post(endpoint(server), body)[0] == 200
    assert collector.stats.spans == 2 * len(spans)
