"""Importing OpenTelemetry traces of LLM calls from OTLP JSON files (format ``otel``).

The spans are made by the real OpenTelemetry SDK around the real ``openai`` client talking to a fake
server (``tests/otel_agent.py``): in the OpenInference convention by its instrumentor, in the GenAI
convention by spans carrying ``gen_ai.*`` attributes. The files are written as the Collector's file
exporter writes them: one OTLP JSON ExportTraceServiceRequest a line.
"""
import json

import pytest

from memorylab import ImportFormatError, Session
from memorylab.audit.audit import audit_session
from memorylab.importers import detect_format, import_source
from memorylab.importers.otel.tree import message_id
from tests.helpers import count_rows
from tests.otel_agent import (
    LISTING,
    SESSION,
    SUMMARY,
    TOOL_CALL,
    gen_ai_agent,
    openinference_agent,
    otlp_json_line,
    run_conversation,
    synthetic_calls,
    tracer_provider,
    tree,
    written,
)


@pytest.fixture(scope="module")
def openinference_spans():
    return run_conversation(openinference_agent, tracer_provider())


@pytest.fixture(scope="module")
def gen_ai_spans():
    return run_conversation(gen_ai_agent, tracer_provider())


def texts(session):
    return {m["id"]: " ".join(p.get("text", "") for p in m["parts"]) for m in session.storage.all()}


def test_an_openinference_trace_becomes_a_tree_with_its_fork_its_compaction_and_its_tool_run(
        store, tmp_path, openinference_spans):
    report = import_source(store, written(tmp_path / "traces.jsonl", openinference_spans))
    assert (report.format, len(report.sessions)) == ("otel", 1)
    assert (report.messages_added, report.overlays_added, report.sessions[0].branches) == (17, 1, 2)
    session = Session.open(store, SESSION, agent_id="otel")
    by_text = {text: message_id for message_id, text in texts(session).items()}
    leaves = {" ".join(p["text"] for p in m["parts"]) for m in session.storage.leaves()}
    assert leaves == {"re: count 2, in French", "re: count 5"}  # the edit of "count 2" is a branch
    french = session.storage.get(by_text["count 2, in French"])
    assert french["parent_id"] == by_text["re: count 1"]

    overlay, = session.get_compactions()
    assert overlay["summary"] == SUMMARY
    assert (overlay["from_id"], overlay["to_id"]) == (by_text["which files are here?"], by_text["re: count 3"])
    assert session.storage.get(by_text["count 4"])["parent_id"] == by_text["re: count 3"]
    path = [m["id"] for m in session.get_history()]
    assert [texts(session).get(i) for i in path if i in by_text.values()][:2] == [
        "You are a terse assistant.", "count 4"]  # the model read the summary in place of the span

    call = next(m for m in session.storage.all() if any(p.get("toolCallId") == TOOL_CALL for p in m["parts"])
                and m["role"] == "assistant")
    assert call["metadata"]["model"] == "gpt-4o-mini" and call["metadata"]["usage"]["prompt_tokens"] == 20
    run, = call["metadata"]["tool_runs"]
    assert (run["name"], run["call_id"], run["arguments"], run["result"]) == ("ls", TOOL_CALL, {"path": "."}, LISTING)
    result = next(m for m in session.storage.all() if m["role"] == "tool")
    assert result["parts"][0] == {"type": "tool-ls", "toolCallId": TOOL_CALL, "toolName": "ls", "output": LISTING,
                                  "state": "output-available"}

    metadata = session.info["metadata"]
    assert metadata["title"] == "which files are here?"
    assert metadata["otel"]["llm_calls"] == 8 and metadata["otel"]["conventions"] == ["openinference"]
    agent_span, = metadata["otel_spans"]  # the span that is no LLM call nor an attached tool run
    assert (agent_span["name"], agent_span["kind"]) == ("agent", "AGENT")


def test_the_compaction_is_audited_for_what_it_lost(store, tmp_path, openinference_spans):
    import_source(store, written(tmp_path / "traces.jsonl", openinference_spans))
    audit, = audit_session(Session.open(store, SESSION, agent_id="otel"))
    assert audit.error is None and audit.span_messages == 10
    assert any("report-2025-03-01.csv" == artifact["text"].rsplit("/", 1)[-1] for artifact in audit.lost)
    assert [(a["text"], a["where"]) for a in audit.kept] == [("/srv/data/a.txt", "summary")]


def test_files_of_both_conventions_import_the_same_session(store, tmp_path, openinference_spans, gen_ai_spans):
    import_source(store, written(tmp_path / "openinference.jsonl", openinference_spans), agent_id="otel")
    report = import_source(store, written(tmp_path / "gen_ai.jsonl", gen_ai_spans), agent_id="gen-ai")
    assert (report.messages_added, report.overlays_added) == (17, 1)
    assert tree(store, agent_id="gen-ai") == tree(store, agent_id="otel")
    metadata = Session.open(store, SESSION, agent_id="gen-ai").info["metadata"]
    assert metadata["otel"]["conventions"] == ["gen_ai"] and metadata["otel_spans"][0]["kind"] == "invoke_agent"


def test_an_import_again_adds_nothing_and_a_grown_file_only_what_it_gained(store, tmp_path, openinference_spans):
    spans = sorted(openinference_spans, key=lambda s: s.start_time)
    path = written(tmp_path / "traces.jsonl", spans[:5])
    first = import_source(store, path)
    assert first.messages_added and not first.overlays_added
    grown = import_source(store, written(path, spans[:5], spans[5:]))
    again = import_source(store, path)
    assert (grown.messages_added + first.messages_added, grown.overlays_added) == (17, 1)
    assert (again.messages_added, again.overlays_added, again.sessions[0].status) == (0, 0, "unchanged")

    whole = tmp_path / "whole" / "traces.jsonl"
    whole.parent.mkdir()
    import_source(store, written(whole, spans), agent_id="whole")
    assert tree(store) == tree(store, agent_id="whole")


def test_a_pretty_printed_request_is_detected_and_read(store, tmp_path, gen_ai_spans):
    path = tmp_path / "export.json"
    path.write_text(json.dumps(json.loads(otlp_json_line(gen_ai_spans)), indent=2), encoding="utf-8")
    assert detect_format(path).name == "otel"
    assert import_source(store, path).messages_added == 17


def test_a_call_without_a_conversation_id_is_a_session_of_its_trace(store, tmp_path):
    provider = tracer_provider()
    synthetic_calls(provider.get_tracer("t"), "", 2)  # an empty conversation id is none
    spans = provider.memory.get_finished_spans()
    report = import_source(store, written(tmp_path / "traces.jsonl", spans[:1], spans[1:]))
    assert sorted(s.session_id for s in report.sessions) == sorted(f"{s.context.trace_id:032x}" for s in spans)
    first = report.sessions[0]
    assert (first.messages_added, first.title) == (2, "asks question 0")


def test_a_call_whose_content_was_not_captured_is_kept_in_the_session_metadata(store, tmp_path):
    provider = tracer_provider()
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent"):
        synthetic_calls(tracer, "c-1", 1)
        with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.conversation.id": "c-1", "gen_ai.usage.input_tokens": 7}):
            pass
    import_source(store, written(tmp_path / "traces.jsonl", provider.memory.get_finished_spans()))
    kept = Session.open(store, "c-1", agent_id="otel").info["metadata"]["otel_spans"]
    assert [(k["name"], "note" in k) for k in kept] == [("invoke_agent", False), ("chat gpt-4o-mini", True)]
    assert kept[1]["attributes"]["gen_ai.usage.input_tokens"] == 7


def test_a_line_that_is_no_request_is_named_and_nothing_is_imported(store, tmp_path, gen_ai_spans):
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_json_line(gen_ai_spans) + json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "not hex", "spanId": "00f067aa0ba902b7"}]}]}]}) + "\n", encoding="utf-8")
    with pytest.raises(ImportFormatError, match=r"line 2: traceId 'not hex' is not hex; nothing was imported"):
        import_source(store, path)
    assert count_rows(store, "messages") == 0


def test_message_ids_follow_from_content_and_position():
    assert message_id(None, "a") == message_id(None, "a") != message_id("x", "a") != message_id(None, "b")
