"""`memorylab check` on real files damaged on purpose with raw sqlite3, behind the engine's back."""
import sqlite3
from pathlib import Path

import pytest

from memorylab import Session, Store
from memorylab.check import CHECKS, ERROR, NOTE, WARNING, check_database, repair_database
from memorylab.cli import main
from memorylab.errors import StoreError
from tests.helpers import write_branched_sessions


@pytest.fixture
def healthy(db_path):
    with Store(db_path) as store:
        write_branched_sessions(store)
    return db_path


def damage(path, *statements):
    """Run raw SQL on the file without foreign keys, as a careless script would."""
    conn = sqlite3.connect(path, isolation_level=None)
    for sql, params in statements:
        conn.execute(sql, params)
    conn.close()


def seq(path, message_id):
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT seq FROM messages WHERE id = ?", (message_id,)).fetchone()[0]


def findings(path):
    with Store(path) as store:
        return check_database(store).findings


def test_a_healthy_file_passes_and_the_command_exits_0(healthy, capsys):
    assert findings(healthy) == []
    assert main(["check", str(healthy)]) == 0
    out = capsys.readouterr().out
    assert "2 sessions, 6 messages, 1 overlay" in out
    assert out.count("  ok  ") == len(CHECKS) and out.rstrip().endswith("no problems found")


def delete_parent(path):
    damage(path, ("DELETE FROM messages WHERE id = 'm4'", ()))


def unindex_message(path):
    damage(path, ("INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', ?, 'words of m3')",
                  (seq(path, "m3"),)))


def index_a_ghost(path):
    damage(path, ("INSERT INTO messages_fts (rowid, text) VALUES (9999, 'ghost words')", ()))


def index_other_words(path):
    row = seq(path, "m3")
    damage(path, ("INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', ?, 'words of m3')", (row,)),
           ("INSERT INTO messages_fts (rowid, text) VALUES (?, 'entirely different words')", (row,)))


def unindex_search_entry(path):
    damage(path, ("INSERT INTO search_entries_fts (search_entries_fts, rowid, key, content)"
                  " SELECT 'delete', pk, key, content FROM search_entries", ()))


def delete_session(path):
    damage(path, ("DELETE FROM sessions WHERE session_id = 's1'", ()))


def make_a_loop(path):
    damage(path, ("UPDATE messages SET parent_id = 'm5' WHERE id = 'm4'", ()))


def delete_overlay_end(path):
    damage(path, ("UPDATE compactions SET to_id = 'm3'", ()), ("DELETE FROM messages WHERE id = 'm3'", ()))


def overlay_across_branches(path):
    damage(path, ("UPDATE compactions SET from_id = 'm3', to_id = 'm5'", ()))


def delete_newest(path):
    damage(path, ("DELETE FROM messages WHERE id = 'm5'", ()))


def point_latest_elsewhere(path):
    damage(path, ("UPDATE sessions SET latest_message_id = 'm3' WHERE session_id = 's1'", ()))


@pytest.mark.parametrize("corrupt, check, severity, fragment", [
    (delete_parent, "orphans", ERROR, "'m5' in session 's1' (parent 'm4')"),
    (unindex_message, "full-text", ERROR, "1 row of messages cannot be found by search"),
    (index_a_ghost, "full-text", ERROR, "messages_fts holds 1 entry for rows of messages that are gone"),
    (index_other_words, "full-text", ERROR, "messages_fts does not match the text stored in messages"),
    (unindex_search_entry, "full-text", ERROR, "1 row of search_entries cannot be found by search"),
    (make_a_loop, "cycles", ERROR, "2 messages cannot be reached from any root"),
    (delete_overlay_end, "overlays", WARNING, "overlay 1 of session 's1': its last message 'm3' is gone"),
    (overlay_across_branches, "overlays", WARNING, "'m3' is not on the path to 'm5'"),
    (delete_newest, "latest leaf", ERROR, "would go under 'm5', which is not a message"),
    (point_latest_elsewhere, "latest leaf", WARNING, "not under the newest message 'm5'"),
])
def test_each_kind_of_damage_is_reported_by_its_check_alone(healthy, corrupt, check, severity, fragment):
    corrupt(str(healthy))
    [finding] = findings(healthy)
    assert (finding.check, finding.severity) == (check, severity)
    assert fragment in finding.message


def test_rows_of_a_deleted_session_are_reported_per_table(healthy, capsys):
    delete_session(str(healthy))
    messages = {f.message for f in findings(healthy) if f.check == "orphans"}
    assert messages == {
        "5 rows of messages belong to a row of sessions that no longer exists",
        "1 row of compactions belong to a row of sessions that no longer exists",
        "1 row of context_blocks belong to a row of sessions that no longer exists",
    }
    assert main(["--db", str(healthy), "check"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  orphans" in out and out.rstrip().endswith("3 errors, 0 warnings")


def test_a_damaged_index_fails_sqlites_integrity_check(healthy):
    # The index's definition no longer matches its entries, as after a botched schema edit.
    damage(str(healthy), ("PRAGMA writable_schema = ON", ()),
           ("UPDATE sqlite_master SET sql = 'CREATE INDEX messages_parent ON messages (session_pk, role)'"
            " WHERE name = 'messages_parent'", ()))
    found = [f for f in findings(healthy) if f.check == "integrity"]
    assert len(found) == 1 and "missing from index messages_parent" in found[0].message
    assert "REINDEX" in found[0].message


def test_the_command_refuses_a_missing_or_foreign_file_without_creating_one(tmp_path, capsys):
    missing = tmp_path / "missing.db"
    assert main(["check", str(missing)]) == 1
    assert "no database at" in capsys.readouterr().err
    assert not missing.exists()
    foreign = tmp_path / "notes.db"
    foreign.write_text("these are not the pages of a database " * 200)
    assert main(["check", str(foreign)]) == 1
    assert "file is not a database" in capsys.readouterr().err


def test_overwritten_pages_are_reported_not_raised(healthy, capsys):
    with sqlite3.connect(healthy) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'messages'").fetchone()[0]
    with open(healthy, "r+b") as file:  # the messages table's b-tree page header becomes garbage
        file.seek((root - 1) * page_size)
        file.write(b"\xff" * 64)
    assert main(["check", str(healthy)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  integrity" in out and "sqlite3 FILE .recover" in out


def test_tool_pair_problems_are_named_per_session_with_kind_and_messages(healthy, capsys):
    with Store(healthy) as store:
        session = Session.open(store, "s1")
        session.append_message({"id": "t1", "role": "tool", "parts": [
            {"type": "tool-read", "toolCallId": "c1", "toolName": "read", "output": "text",
             "state": "output-available"}]}, parent_id="m3")
    [finding] = findings(healthy)
    assert (finding.check, finding.severity) == ("tool pairs", WARNING)
    assert main(["check", str(healthy)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  tool pairs" in out and out.count("  ok  ") == len(CHECKS) - 1
    assert "session 's1': 1 tool-pair problem" in out and "orphan_result at 't1'" in out
    assert "delete the result in t1" in out


def file_bytes(path):
    """The database file and what its write-ahead log holds (an empty log holds nothing)."""
    files = {end: Path(str(path) + end) for end in ("", "-wal")}
    return {end: file.read_bytes() for end, file in files.items() if file.exists() and file.stat().st_size}


def test_a_read_only_database_is_checked_without_writing_and_says_what_it_could_not_check(healthy):
    with Store(healthy) as store:  # settle the file: a first open may still write its WAL
        assert check_database(store).ok
    before = file_bytes(healthy)
    with Store(healthy, read_only=True) as store:
        report = check_database(store)
    assert report.ok and str(report).rstrip().endswith("no problems found")
    assert [(f.check, f.severity) for f in report.findings] == [("full-text", NOTE)] * 3
    assert "memory_records_fts: not checked: the database is read-only" in str(report)
    assert "messages_fts against the text of messages: not checked: the database is read-only" in str(report)
    assert file_bytes(healthy) == before


def test_a_read_only_connection_still_finds_a_damaged_index(healthy):
    unindex_message(str(healthy))
    with Store(healthy) as store:
        store.fetch_one("PRAGMA query_only = ON")  # root ignores file permissions: SQLite's own read-only switch
        found = {(f.check, f.severity) for f in check_database(store).findings}
    assert found == {("full-text", ERROR), ("full-text", NOTE)}


def test_repair_on_a_read_only_database_is_one_line_and_changes_nothing(healthy, capsys):
    damage(str(healthy), ("UPDATE messages SET parts = '[' WHERE id = 'm3'", ()))
    with Store(healthy, read_only=True) as store:
        with pytest.raises(StoreError):
            repair_database(store)
    assert findings(healthy)[0].check == "readable"
