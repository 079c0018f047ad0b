"""A message row damaged behind the engine's back costs that message, not its session: reads skip
it with a warning naming it, a direct read says what is wrong, and `memorylab check` lists it."""
import json

import pytest

from memorylab import KVStore, LongTermMemory, Session
from memorylab.check import check_database
from memorylab.cli import main
from memorylab.errors import DamagedRowError, DamagedRowWarning
from memorylab.io import export_session
from memorylab.messages import to_openai
from memorylab.store.quarantine import Quarantine
from memorylab.store.rows import JSON_KINDS
from memorylab.store.schema import JSON, TABLES
from tests.helpers import ids, text_message

DAMAGE = {
    "unreadable parts": ("parts", '[{"type": "text", "te', "parts is not readable JSON"),
    "parts holding a number": ("parts", "42", "parts is a JSON int, not a list"),
    "metadata holding a list": ("metadata", "[1, 2]", "metadata is a JSON list, not a dict"),
}


@pytest.fixture(params=list(DAMAGE))
def damaged(request, store):
    """Session "s1": m1 - m2 - m3 - m4 with m2's row damaged; session "s2" untouched."""
    session = Session.create(store, "s1")
    for number in range(1, 5):
        session.append_message(text_message(f"m{number}", f"words of m{number}"))
    Session.create(store, "s2").append_message(text_message("o1", "words of another session"))
    column, value, problem = DAMAGE[request.param]
    with store.transaction() as conn:
        conn.execute(f"UPDATE messages SET {column} = ? WHERE id = 'm2'", (value,))
    return session, problem


def test_history_leaves_the_damaged_message_out_and_warns_naming_it(damaged):
    session, problem = damaged
    with pytest.warns(DamagedRowWarning, match=f"session 's1': skipped message 'm2': its stored {problem}"):
        history = session.get_history()
    assert ids(history) == ["m1", "m3", "m4"]
    with pytest.warns(DamagedRowWarning):
        assert ids(session.get_all_messages()) == ["m1", "m3", "m4"]
    with pytest.warns(DamagedRowWarning):
        assert ids(session.get_branches("m1")) == []
    assert ids(Session.open(session.store, "s2").get_history()) == ["o1"]


def test_reading_the_damaged_message_itself_says_which_row_and_what_is_wrong(damaged):
    session, problem = damaged
    with pytest.raises(DamagedRowError, match=f"session 's1', message 'm2': its stored {problem}"):
        session.get_message("m2")


def test_the_session_keeps_working_around_the_damage(damaged):
    session, _ = damaged
    session.append_message(text_message("m5", "after the damage"))
    session.append_message(text_message("b1", "a branch under the damaged message"), parent_id="m2")
    with pytest.warns(DamagedRowWarning):
        assert ids(session.get_history("b1")) == ["m1", "b1"]
    assert [hit["id"] for hit in session.search("damage")] == ["m5", "b1"]


def test_an_export_leaves_the_damaged_message_out_and_says_so(damaged):
    session, _ = damaged
    with pytest.warns(DamagedRowWarning, match="'m2'"):
        exported = export_session(session)
    assert ids(exported["messages"]) == ["m1", "m3", "m4"]


def test_check_names_the_damaged_message_and_its_session(damaged):
    session, problem = damaged
    [finding] = check_database(session.store).findings
    assert finding.check == "readable" and finding.severity == "error"
    assert f"message 'm2': its stored {problem}" in finding.message
    assert "in session 's1'" in finding.message


# -- every table, and the command line ---------------------------------------------------------------

def damage(store, sql, *params):
    """Write behind the engine's back, as a careless script or a bad disk would."""
    with store.transaction() as conn:
        conn.execute(sql, params)


@pytest.fixture
def two_sessions(store):
    """Sessions "s1" (m1 - m2 - m3, an overlay over m1..m2, m2 pinned) and "s2" (o1)."""
    session = Session.create(store, "s1", metadata={"title": "first"})
    for number in range(1, 4):
        session.append_message(text_message(f"m{number}", f"words of m{number}"))
    session.add_compaction("m1 and m2, summarized", "m1", "m2")
    session.pin("m2", note="keep")
    Session.create(store, "s2", metadata={"title": "second"}).append_message(text_message("o1", "other words"))
    return session


def test_a_session_with_unreadable_metadata_is_left_out_of_the_list_and_refused_by_name(two_sessions):
    store = two_sessions.store
    damage(store, "UPDATE sessions SET metadata = '{\"title\": \"fir' WHERE session_id = 's1'")
    with pytest.warns(DamagedRowWarning, match="skipped session 's1': its stored metadata is not readable JSON"):
        assert [row["session_id"] for row in store.sessions.list()] == ["s2"]
    with pytest.warns(DamagedRowWarning, match="skipped session 's1'"):  # the lab's sidebar search
        assert [row["session_id"] for row in store.sessions.list(search="s")] == ["s2"]
    assert [row["session_id"] for row in store.sessions.list(search="second")] == ["s2"]
    with pytest.raises(DamagedRowError, match="session 's1': its stored metadata is not readable JSON"):
        two_sessions.info
    assert ids(two_sessions.get_all_messages()) == ["m1", "m2", "m3"]
    [finding] = check_database(store).findings
    assert finding.check == "readable" and finding.message.startswith("1 row of sessions cannot be read")
    assert finding.message.endswith(": session 's1': its stored metadata is not readable JSON (Unterminated string "
                                    "starting at: line 1 column 11 (char 10))")


def test_parts_of_a_shape_the_engine_never_writes_are_damage(two_sessions):
    store = two_sessions.store
    damage(store, "UPDATE messages SET parts = '[42]' WHERE id = 'm3'")
    damage(store, "UPDATE messages SET parts = ? WHERE id = 'o1'",
           '[{"type": "tool-read", "toolCallId": "c1", "state": "finished"}]')
    with pytest.warns(DamagedRowWarning, match=r"skipped message 'm3': its stored parts hold a part the engine never "
                                               r"writes: parts\[0\] must be a dict"):
        assert ids(two_sessions.get_all_messages()) == ["m1", "m2"]
    with pytest.warns(DamagedRowWarning, match=r"message 'o1'.*parts\[0\]\.state must be input-available"):
        assert Session.open(store, "s2").get_history() == []
    problems = [finding.message for finding in check_database(store).findings if finding.check == "readable"]
    assert len(problems) == 1 and problems[0].startswith("2 rows of messages cannot be read")


def test_to_openai_leaves_out_a_part_it_cannot_convert_and_says_which(two_sessions):
    messages = [{"id": "x1", "role": "user", "parts": [{"type": "text", "text": "kept"}, 42, {"text": "no type"}]},
                {"id": "x2", "role": "assistant", "parts": [{"type": "text", "text": 7}]}]
    with pytest.warns(DamagedRowWarning) as caught:
        converted = to_openai(messages)
    assert converted == [{"role": "user", "content": "kept"}, {"role": "assistant", "content": ""}]
    assert [str(w.message) for w in caught] == [
        "message 'x1': left out of the request: parts[1] must be a dict with a non-empty string 'type'",
        "message 'x1': left out of the request: parts[2] must be a dict with a non-empty string 'type'",
        "message 'x2': left out of the request: parts[0].text must be a string, got int",
    ]


def test_an_unreadable_overlay_is_left_out_and_the_history_reads_without_it(two_sessions):
    damage(two_sessions.store, "UPDATE compactions SET metadata = '[' WHERE id = 1")
    with pytest.warns(DamagedRowWarning, match="session 's1': skipped overlay 1: its stored metadata"):
        assert ids(two_sessions.get_history()) == ["m1", "m2", "m3"]
    with pytest.raises(DamagedRowError, match="session 's1', overlay 1: its stored metadata is not readable"):
        two_sessions.storage.get_overlay(1)


def test_kv_entries_long_term_records_and_runs_skip_a_damaged_row(store):
    kv = KVStore(store, tenant_id="acme", namespace="prefs")
    kv.set("good", {"a": 1})
    kv.set("bad", {"b": 2})
    damage(store, "UPDATE kv_entries SET value = '{\"b\": ' WHERE key = 'bad'")
    with pytest.warns(DamagedRowWarning, match="skipped KV entry 'bad' \\(namespace 'prefs', tenant 'acme'\\)"):
        assert kv.get_all() == {"good": {"a": 1}}
    with pytest.raises(DamagedRowError, match="KV entry 'bad' .*: its stored value is not readable JSON"):
        kv.get("bad")

    memory = LongTermMemory(store, workspace="w")
    kept = memory.add_record("the kept fact")
    damaged = memory.add_record("the damaged fact")
    damage(store, "UPDATE memory_records SET body = '[1, 2]' WHERE pk = ?", damaged["id"])
    with pytest.warns(DamagedRowWarning, match=f"skipped long-term record {damaged['id']} \\(workspace 'w'\\): "
                                               "its stored body is a JSON list, not a dict"):
        assert [record["id"] for record in memory.records()] == [kept["id"]]
    with pytest.raises(DamagedRowError, match=f"long-term record {damaged['id']}"):
        memory.get_record(damaged["id"])

    found = {(row["table"], row["problem"].split(":")[0]) for row in store.integrity.damaged_rows()}
    assert found == {("kv_entries", "KV entry 'bad' (namespace 'prefs', tenant 'acme')"),
                     ("memory_records", f"long-term record {damaged['id']} (workspace 'w')")}


def test_json_kinds_name_every_json_column_of_the_schema():
    declared = {table.name: {column.name for column in table.columns if column.type == JSON} for table in TABLES}
    assert {table: set(kinds) for table, kinds in JSON_KINDS.items()} == \
           {table: columns for table, columns in declared.items() if columns}


def main_on(target, *argv):
    return main(["--db", str(target), *argv])


def test_repair_sets_a_message_aside_reattaches_its_children_and_keeps_what_named_it(two_sessions, store_target,
                                                                                     capsys):
    store = two_sessions.store
    damage(store, "UPDATE messages SET metadata = 'not json' WHERE id = 'm2'")
    assert main_on(store_target, "check", "--repair") == 0
    out = capsys.readouterr().out
    assert ("set aside message 'm2': its stored metadata is not readable JSON (Expecting value: line 1 column 1 "
            "(char 0)) in session 's1' (quarantine #1); its 1 child now hangs under 'm1'; 1 overlay and 1 pin "
            "naming it set aside with it") in out
    assert "FAIL" not in out and "note: 3 rows set aside by `memorylab check --repair`" in out
    assert ids(two_sessions.get_all_messages()) == ["m1", "m3"]
    assert ids(two_sessions.get_history()) == ["m1", "m3"]
    assert two_sessions.get_compactions() == [] and two_sessions.get_pins() == []
    kept = Quarantine(store).rows()
    assert [(row["table_name"], row["row_key"]) for row in kept][1:] == [
        ("compactions", '{"session_pk":%d,"id":1}' % two_sessions.pk),
        ("message_pins", '{"session_pk":%d,"message_id":"m2"}' % two_sessions.pk)]
    whole = json.loads(store.fetch_one("SELECT row FROM quarantine WHERE pk = 1")["row"])
    assert whole["metadata"] == "not json" and whole["parts"] == '[{"type":"text","text":"words of m2"}]'
    assert check_database(store).ok


def test_repair_keeps_a_session_row_its_messages_belong_to(two_sessions, store_target, capsys):
    store = two_sessions.store
    damage(store, "UPDATE sessions SET metadata = '{' WHERE session_id = 's1'")
    assert main_on(store_target, "check", "--repair") == 0
    assert "the row stays, its metadata reset to empty, so what belongs to it stays" in capsys.readouterr().out
    assert two_sessions.info["metadata"] == {}
    assert ids(two_sessions.get_all_messages()) == ["m1", "m2", "m3"]
    assert json.loads(Quarantine(store).rows()[0]["row_key"]) == {"pk": two_sessions.pk}


def test_the_command_line_reports_a_damaged_row_in_one_line(two_sessions, store_target, capsys):
    store = two_sessions.store
    damage(store, "UPDATE messages SET parts = '[' WHERE id = 'm2'")
    damage(store, "UPDATE sessions SET metadata = '{' WHERE session_id = 's2'")
    assert main_on(store_target, "stats") == 0
    out, err = capsys.readouterr()
    assert "1 session(s), 3 messages" in out
    assert err == ("memorylab: warning: skipped session 's2': its stored metadata is not readable JSON (Expecting "
                   "property name enclosed in double quotes: line 1 column 2 (char 1)); `memorylab check` lists such "
                   "rows and `memorylab check --repair` sets them aside\n")
    assert main_on(store_target, "export", "s1") == 0
    out, err = capsys.readouterr()
    assert ids(json.loads(out)["messages"]) == ["m1", "m3"]
    assert err.startswith("memorylab: warning: session 's1': skipped message 'm2'") and err.count("\n") == 1
    assert main_on(store_target, "export", "s2") == 1
    assert capsys.readouterr().err.startswith("memorylab: error: session 's2': its stored metadata is not readable")
    assert main_on(store_target, "check") == 1
    out = capsys.readouterr().out
    assert "1 row of messages cannot be read" in out and "1 row of sessions cannot be read" in out
