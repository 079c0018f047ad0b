import json

import pytest

from memorylab import (
    ConflictError,
    ImportFormatError,
    Session,
    Store,
    export_session,
    import_session,
    parse_export,
    read_export,
    write_export,
)
from memorylab.io import MAX_IMPORT_BYTES
from memorylab.store import ALL_TENANTS
from memorylab.store import sessions as session_rows
from tests.helpers import text_message


@pytest.fixture
def rich(session):
    session.set_metadata({"title": "Rich", "tags": ["demo"]})
    session.append_message({"id": "sys", "role": "system", "parts": [{"type": "text", "text": "Be exact."}]})
    session.append_message(text_message("u1", "What is 2+2? <b>bold</b> 日本"))
    session.append_message({"id": "a1", "role": "assistant", "metadata": {"usage": {"tokens": 3}}, "parts": [
        {"type": "reasoning", "text": "easy"},
        {"type": "tool-calc", "toolCallId": "c1", "toolName": "calc", "input": {"expr": "2+2"},
         "output": {"value": 4}, "state": "output-available"},
        {"type": "text", "text": "4"}]})
    session.append_message(text_message("a1b", "Four.", "assistant"), parent_id="u1")
    session.append_message(text_message("u2", "thanks"))
    session.add_compaction("User asked 2+2.", "u1", "a1b", metadata={"by": "test"})
    with session.store.transaction() as conn:
        conn.execute("INSERT INTO context_blocks (session_pk, label, content, updated_at)"
                     " VALUES (?, 'memory', 'likes math', 'T')", (session.pk,))
    return session


def test_export_import_export_is_identity(rich, tmp_path):
    exported = export_session(rich)
    assert len(exported["messages"]) == 5 and len(exported["compactions"]) == 1
    with Store(tmp_path / "other.db") as other:
        copy = import_session(other, json.loads(json.dumps(exported)))
        assert export_session(copy) == exported
        assert copy.get_history() == rich.get_history()
        assert [h["id"] for h in copy.search("bold")] == ["u1"]


def test_file_round_trip_and_import_under_a_new_id(rich, tmp_path):
    path = tmp_path / "s.json"
    write_export(rich, path)
    copy = import_session(rich.store, read_export(path), session_id="s1-copy", agent_id="other")
    assert copy.session_id == "s1-copy" and copy.agent_id == "other"
    assert copy.get_history() == rich.get_history()


def test_import_over_an_existing_session_needs_replace(rich):
    data = export_session(rich)
    with pytest.raises(ConflictError, match="already exists"):
        import_session(rich.store, data)
    data["messages"] = data["messages"][:2]
    data["compactions"] = []
    replaced = import_session(rich.store, data, replace=True)
    assert replaced.stats()["messages"] == 2


BROKEN = [
    ([], "JSON object"),
    ({"format": "other"}, "'format'"),
    ({"format": "memorylab.session", "version": 99, "session": {"id": "x"}}, "newer memorylab"),
    ({"format": "memorylab.session", "version": 1}, "'session'"),
    ({"format": "memorylab.session", "version": 1, "session": {"id": "x\x00"}}, "control characters"),
    ({"format": "memorylab.session", "version": 1, "session": {"id": "x"}, "messages": {}},
     "'messages' must be a list"),
    ({"format": "memorylab.session", "version": 1, "session": {"id": "x"},
      "messages": [{"id": "a", "role": "user", "parts": [], "parent_id": "later"}]}, "not an earlier message"),
    ({"format": "memorylab.session", "version": 1, "session": {"id": "x"},
      "messages": [{"id": "a", "role": "user", "parts": []}, {"id": "a", "role": "user", "parts": []}]},
     "duplicate id"),
    ({"format": "memorylab.session", "version": 1, "session": {"id": "x"},
      "messages": [{"id": "a", "role": "bad", "parts": []}]}, "messages[0]"),
    ({"format": "memorylab.session", "version": 1, "session": {"id": "x"},
      "messages": [{"id": "a", "role": "user", "parts": []}],
      "compactions": [{"id": 1, "from_id": "a", "to_id": "zz", "summary": "s"}]}, "to_id"),
    ({"format": "memorylab.session", "version": 1, "session": {"id": "x"},
      "messages": [{"id": "a", "role": "user", "parts": []}], "context_blocks": [{"label": 1}]}, "context_blocks[0]"),
]


@pytest.mark.parametrize("data, fragment", BROKEN)
def test_broken_imports_are_refused_and_write_nothing(rich, data, fragment):
    before = rich.store.sessions.list()
    with pytest.raises(ImportFormatError) as error:
        import_session(rich.store, data)
    assert fragment in str(error.value)
    assert rich.store.sessions.list() == before
    assert len(rich.get_all_messages()) == 5


def test_failure_midway_through_the_write_rolls_back(store, monkeypatch):
    data = {"format": "memorylab.session", "version": 1, "session": {"id": "atomic"},
            "messages": [text_message(f"m{i}", f"text {i}") | {"parent_id": f"m{i-1}" if i else None}
                         for i in range(50)]}
    original_row = session_rows.message_row
    calls = []

    def failing_row(store, pk, message, parent):
        # Rows are produced one by one as the import inserts them: 29 are written when this fails.
        calls.append(message["id"])
        if len(calls) == 30:
            raise OSError("disk full")
        return original_row(store, pk, message, parent)

    monkeypatch.setattr(session_rows, "message_row", failing_row)
    with pytest.raises(OSError):
        import_session(store, data)
    monkeypatch.undo()
    assert store.sessions.find("default", "default", "atomic") is None
    assert store.search("text", tenant_id=ALL_TENANTS) == []


def test_broken_json_and_oversized_files(tmp_path, monkeypatch):
    with pytest.raises(ImportFormatError, match="not valid JSON"):
        parse_export('{"format": "memorylab.session", ')
    with pytest.raises(ImportFormatError, match="not valid JSON"):
        parse_export(b"\xff\xfe\x00garbage")
    big = tmp_path / "big.json"
    big.write_text("{}")
    monkeypatch.setattr("memorylab.io.MAX_IMPORT_BYTES", 1)
    with pytest.raises(ImportFormatError, match="limited to"):
        read_export(big)
    assert MAX_IMPORT_BYTES >= 100 * 1024 * 1024


def test_export_of_an_empty_session(store):
    data = export_session(Session.create(store, "empty"))
    assert data["messages"] == [] and data["compactions"] == [] and data["session"]["id"] == "empty"
