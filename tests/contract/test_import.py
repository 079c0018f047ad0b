"""Importing other systems' memory: detection, the writer's guarantees, and OpenAI chat messages.

The format-specific importers have their own modules (test_import_<format>.py), each on data written
by the real library. Here: what every import shares (one transaction, nothing twice, growth, dry
runs, clear refusals) through the simplest format, OpenAI chat messages, and the command line.
"""
import json

import pytest

from memorylab import (
    ConflictError,
    ImportFormatError,
    InvalidInputError,
    Session,
    export_session,
    to_openai,
    write_export,
)
from memorylab.cli import main
from memorylab.history.truncation import ROW_SIZE_LIMIT_BYTES
from memorylab.importers import FORMATS, SourceMessage, SourceSession, detect_format, import_source, write_sessions
from tests.helpers import count_rows

WEATHER = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"},
    {"role": "assistant", "content": "18C and sunny."},
]


def write_jsonl(path, conversations):
    path.write_text("".join(json.dumps(c) + "\n" for c in conversations), encoding="utf-8")
    return path


def opened(store, session_id, agent_id="openai-messages"):
    return Session.open(store, session_id, agent_id=agent_id)


def test_a_json_list_is_one_conversation_with_its_tool_call_paired(store, tmp_path):
    path = tmp_path / "paris.json"
    path.write_text(json.dumps(WEATHER, indent=2))
    report = import_source(store, path)
    assert (report.format, report.messages_found, report.messages_added) == ("openai-messages", 5, 5)
    session = opened(store, "paris")
    history = session.get_history()
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool", "assistant"]
    tool_result = history[3]["parts"][0]
    assert (tool_result["type"], tool_result["toolName"], tool_result["output"]) == ("tool-weather", "weather",
                                                                                     "18C, sunny")
    request = to_openai(history)
    assert request[2]["tool_calls"][0]["id"] == request[3]["tool_call_id"] == "call_1"
    assert history[1]["metadata"]["source_id"] == "paris#1"
    source = session.info["metadata"]["source"]
    assert {key: source[key] for key in ("format", "id", "file")} == {"format": "openai-messages", "id": "paris",
                                                                      "file": str(path)}
    assert source["opening"]["messages"] == 5  # what tells this paris.json from another one


def test_jsonl_holds_one_conversation_per_line_in_either_layout(store, tmp_path):
    path = write_jsonl(tmp_path / "chats.jsonl", [
        {"id": "first", "title": "Paris weather", "messages": WEATHER},
        WEATHER[1:2] + [{"role": "assistant", "content": "Let me check."}],
    ])
    report = import_source(store, path)
    assert [(s.session_id, s.messages_added) for s in report.sessions] == [("first", 5), ("chats-2", 2)]
    assert opened(store, "first").info["metadata"]["title"] == "Paris weather"
    assert opened(store, "chats-2").get_history()[-1]["parts"][0]["text"] == "Let me check."


def test_importing_again_adds_nothing_and_a_grown_source_adds_only_its_news(store, tmp_path):
    path = write_jsonl(tmp_path / "chats.jsonl", [{"id": "a", "messages": WEATHER[:2]}])
    import_source(store, path)
    again = import_source(store, path)
    assert (again.messages_found, again.messages_added, again.sessions[0].status) == (2, 0, "unchanged")

    write_jsonl(path, [{"id": "a", "messages": WEATHER}, {"id": "b", "messages": WEATHER[1:2]}])
    grown = import_source(store, path)
    assert [(s.session_id, s.status, s.messages_added) for s in grown.sessions] == [("a", "grew", 3), ("b", "new", 1)]
    history = opened(store, "a").get_history()
    assert [m["id"] for m in history] == [f"a#{i}" for i in range(5)]
    assert count_rows(store, "messages") == 6


def test_a_dry_run_reports_what_an_import_would_add_and_writes_nothing(store, tmp_path):
    path = write_jsonl(tmp_path / "chats.jsonl", [{"id": "a", "messages": WEATHER}])
    report = import_source(store, path, dry_run=True)
    assert report.dry_run and report.messages_added == 5 and "would add 5 messages" in str(report)
    assert count_rows(store, "messages") == 0 and store.sessions.count() == 0


def test_a_broken_line_is_refused_by_its_number_and_nothing_is_written(store, tmp_path):
    path = tmp_path / "chats.jsonl"
    path.write_text(json.dumps({"id": "a", "messages": WEATHER}) + "\n" + '{"id": "b", "messages": [\n')
    with pytest.raises(ImportFormatError, match=r"chats\.jsonl, line 2: not valid JSON.*nothing was imported"):
        import_source(store, path)
    assert store.sessions.count() == 0 and count_rows(store, "messages") == 0


@pytest.mark.parametrize("conversation, problem", [
    ({"messages": "hello"}, "expected a list of chat messages"),
    ([{"role": "user", "content": "hi"}, "not a message"], r"messages\[1\]: expected a chat message object"),
    ([{"role": "wizard", "content": "hi"}], r"messages\[0\]: role must be one of"),
    ([{"role": "tool", "content": "18C"}], r"messages\[0\]: a tool message answers one tool call"),
])
def test_a_malformed_message_is_refused_naming_the_line_and_message(store, tmp_path, conversation, problem):
    path = write_jsonl(tmp_path / "chats.jsonl", [WEATHER, conversation])
    with pytest.raises(ImportFormatError, match=f"line 2, {problem}" if "messages[" in problem else problem):
        import_source(store, path, format="openai-messages")
    assert count_rows(store, "messages") == 0


def test_hostile_text_is_stored_as_text_and_a_huge_message_is_shrunk_to_the_row_limit(store, tmp_path):
    hostile = 'NEAR("a" "b") OR * <script>alert(1)</script> \'; DROP TABLE messages; --'
    path = write_jsonl(tmp_path / "chats.jsonl", [{"id": "h", "messages": [
        {"role": "user", "content": hostile},
        {"role": "assistant", "content": "x" * (ROW_SIZE_LIMIT_BYTES * 2)},
    ]}])
    import_source(store, path)
    history = opened(store, "h").get_history()
    assert history[0]["parts"][0]["text"] == hostile
    assert len(history[1]["parts"][0]["text"]) < ROW_SIZE_LIMIT_BYTES
    assert history[1]["metadata"]["row_size_limit"]
    assert [hit["id"] for hit in store.search("DROP TABLE", tenant_id="default")] == ["h#0"]


def test_a_session_that_was_not_imported_from_the_source_is_never_merged_into(store, tmp_path):
    Session.create(store, "paris", agent_id="openai-messages").append_message({"role": "user", "content": "mine"})
    path = tmp_path / "paris.json"
    path.write_text(json.dumps(WEATHER))
    with pytest.raises(ConflictError, match="not imported from this openai-messages conversation.*--agent"):
        import_source(store, path)
    report = import_source(store, path, agent_id="imported")
    assert report.messages_added == 5 and len(opened(store, "paris").get_history()) == 1


def test_a_parent_that_is_not_in_the_conversation_is_refused(store):
    messages = [
        SourceMessage({"id": "m1", "role": "user", "content": "hi"}, parent_id=None, where="entry 1"),
        SourceMessage({"id": "m2", "role": "assistant", "content": "yo"}, parent_id="ghost", where="entry 2"),
    ]
    with pytest.raises(ImportFormatError, match="src, entry 2: message 'm2' answers 'ghost'"):
        write_sessions(store, [SourceSession("s", messages)], source="src", format_name="test", agent_id="a")
    assert store.sessions.count() == 0


def test_progress_is_reported_as_messages_are_read(store, tmp_path):
    path = write_jsonl(tmp_path / "chats.jsonl", [{"id": f"c{i}", "messages": WEATHER} for i in range(300)])
    seen = []
    import_source(store, path, progress=seen.append)
    assert seen == [1000, 1500]


def test_every_format_is_detected_by_content_and_the_rest_is_refused(tmp_path):
    messages = tmp_path / "no-extension"
    messages.write_text(json.dumps(WEATHER))
    assert detect_format(messages).name == "openai-messages"
    notes = tmp_path / "notes.json"
    notes.write_text('{"hello": "world"}')
    with pytest.raises(ImportFormatError, match="not a format memorylab imports"):
        detect_format(notes)
    binary = tmp_path / "blob.jsonl"
    binary.write_bytes(bytes(range(256)) * 10)
    with pytest.raises(ImportFormatError, match="not a format memorylab imports"):
        detect_format(binary)
    with pytest.raises(ImportFormatError, match="unknown format 'csv'"):
        import_source(None, messages, format="csv")
    assert set(FORMATS) == {"openai-agents", "langgraph", "llm", "memorylab", "claude-code", "codex", "otel",
                            "openai-messages"}


def test_a_memorylab_export_is_detected_and_imported_whole(store, tmp_path):
    session = Session.create(store, "orig", metadata={"title": "Original"})
    session.append_message({"role": "user", "content": "keep me"})
    path = tmp_path / "export.json"
    write_export(session, path)
    assert detect_format(path).name == "memorylab"
    report = import_source(store, path, agent_id="copies")
    assert (report.format, report.messages_added) == ("memorylab", 1)
    assert Session.open(store, "orig", agent_id="copies").get_history()[0]["parts"][0]["text"] == "keep me"


def exported(store, path):
    session = Session.create(store, "orig", agent_id="bot", metadata={"title": "Original"})
    session.append_message({"id": "q", "role": "user", "content": "keep me"})
    session.append_message({"id": "a", "role": "assistant", "content": "kept"})
    session.add_compaction("asked, answered", "q", "a")
    session.pin("q", note="the question")
    write_export(session, path)
    return session


def test_an_export_is_a_source_format_read_into_one_whole_session_for_the_writer(store, tmp_path):
    original = exported(store, tmp_path / "export.json")
    (source_session,) = FORMATS["memorylab"].read(tmp_path / "export.json")
    assert (source_session.source_id, source_session.agent_id, source_session.whole.pins[0]["note"]) == (
        "orig", "bot", "the question")
    report = write_sessions(store, [source_session], source="export.json", format_name="memorylab", agent_id="copies")
    assert str(report).splitlines()[1] == "  orig (agent copies): new, 2 of 2 messages, 1 branch(es), 1 of 1 overlay(s)"
    copy = Session.open(store, "orig", agent_id="copies")
    assert export_session(copy) | {"session": None} == export_session(original) | {"session": None}


def test_importing_an_export_keeps_its_agent_takes_a_new_id_or_replaces_on_request(store, tmp_path):
    path = tmp_path / "export.json"
    original = exported(store, path)
    with pytest.raises(ConflictError, match="already exists"):
        import_source(store, path)
    with pytest.raises(ConflictError, match="already exists"):
        import_source(store, path, dry_run=True)
    report = import_source(store, path, session_id="copy")
    assert [(s.session_id, s.agent_id, s.messages_added, s.status) for s in report.sessions] == [
        ("copy", "bot", 2, "new")]
    assert Session.open(store, "copy", agent_id="bot").get_history() == original.get_history()
    original.append_message({"id": "later", "role": "user", "content": "not in the file"})
    assert import_source(store, path, replace=True, dry_run=True).messages_added == 2
    assert len(original.get_all_messages()) == 3
    assert [s.status for s in import_source(store, path, replace=True).sessions] == ["replaced"]
    assert [m["id"] for m in Session.open(store, "orig", agent_id="bot").get_all_messages()] == ["q", "a"]
    chats = write_jsonl(tmp_path / "chats.jsonl", [{"id": "c", "messages": WEATHER}])
    for options in ({"session_id": "x"}, {"replace": True}):
        with pytest.raises(InvalidInputError, match="session_id and replace apply to a memorylab export"):
            import_source(store, chats, **options)
    assert store.sessions.find("default", "openai-messages", "c") is None


def test_the_command_line_imports_previews_and_refuses_clearly(tmp_path, capsys):
    db = str(tmp_path / "cli.db")
    path = write_jsonl(tmp_path / "chats.jsonl", [{"id": "a", "messages": WEATHER}])
    assert main(["--db", db, "import", str(path), "--dry-run"]) == 0
    assert "would add 5 messages" in capsys.readouterr().out
    assert main(["--db", db, "import", str(path), "--agent", "support"]) == 0
    out = capsys.readouterr().out
    assert "added 5 messages" in out and "a (agent support): new, 5 of 5 messages" in out
    assert main(["--db", db, "import", str(path), "--agent", "support"]) == 0
    assert "a (agent support): unchanged, 0 of 5 messages" in capsys.readouterr().out
    assert main(["--db", db, "import", str(path), "--session-id", "x"]) == 1
    assert "--session-id and --replace apply to a memorylab export" in capsys.readouterr().err
    path.write_text("not json at all\n")
    assert main(["--db", db, "import", str(path), "--format", "openai-messages"]) == 1
    assert "chats.jsonl: not valid JSON" in capsys.readouterr().err
