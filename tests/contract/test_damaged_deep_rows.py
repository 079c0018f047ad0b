"""A stored JSON document nested deeper than the decoder recurses is a damaged row like any other: reads
skip it with a DamagedRowWarning, `memorylab check` lists it and `check --repair` sets it aside, instead
of every read of its session, export and check raising RecursionError."""
import json
import re

import pytest

from memorylab import KVStore, Session
from memorylab.check import check_database
from memorylab.cli import main
from memorylab.errors import DamagedRowError, DamagedRowWarning
from memorylab.io import export_session
from memorylab.store.quarantine import Quarantine
from tests.helpers import ids, text_message

DEEP = "[" * 100_000 + "]" * 100_000
TOO_DEEP = "is not readable JSON (nested too deeply to read)"


@pytest.fixture(params=["parts", "metadata"])
def damaged(request, store):
    """Session "s1": m1 - m2 - m3 with m2's parts or metadata nested 100,000 deep; session "s2" untouched."""
    session = Session.create(store, "s1")
    for number in range(1, 4):
        session.append_message(text_message(f"m{number}", f"words of m{number}"))
    Session.create(store, "s2").append_message(text_message("o1", "other words"))
    with store.transaction() as conn:
        conn.execute(f"UPDATE messages SET {request.param} = ? WHERE id = 'm2'", (DEEP,))
    return session, request.param


def test_reads_skip_the_deep_message_and_name_it(damaged):
    session, column = damaged
    with pytest.warns(DamagedRowWarning, match=re.escape(f"skipped message 'm2': its stored {column} {TOO_DEEP}")):
        assert ids(session.get_history()) == ["m1", "m3"]
    with pytest.warns(DamagedRowWarning):
        assert ids(session.get_all_messages()) == ["m1", "m3"]
    with pytest.warns(DamagedRowWarning, match="'m2'"):
        assert ids(export_session(session)["messages"]) == ["m1", "m3"]
    with pytest.raises(DamagedRowError, match=re.escape(f"session 's1', message 'm2': its stored {column} {TOO_DEEP}")):
        session.get_message("m2")
    assert len(session.storage.outline()) == 3  # the tree still draws it, without its parts
    assert ids(Session.open(session.store, "s2").get_history()) == ["o1"]


def test_check_lists_the_deep_message_and_repair_sets_it_aside(damaged, store_target, capsys):
    session, column = damaged
    [finding] = check_database(session.store).findings
    assert finding.check == "readable" and f"message 'm2': its stored {column} {TOO_DEEP}" in finding.message
    assert main(["--db", str(store_target), "check"]) == 1
    assert "1 row of messages cannot be read" in capsys.readouterr().out
    assert main(["--db", str(store_target), "export", "s1"]) == 0
    assert ids(json.loads(capsys.readouterr().out)["messages"]) == ["m1", "m3"]
    assert main(["--db", str(store_target), "check", "--repair"]) == 0
    assert "set aside message 'm2'" in capsys.readouterr().out
    assert ids(session.get_history()) == ["m1", "m3"]
    assert [row["table_name"] for row in Quarantine(session.store).rows()] == ["messages"]
    assert json.loads(session.store.fetch_one("SELECT row FROM quarantine")["row"])[column] == DEEP
    assert check_database(session.store).ok


def test_a_deep_kv_value_is_skipped_and_listed(store):
    kv = KVStore(store)
    kv.set("good", 1)
    kv.set("deep", 2)
    with store.transaction() as conn:
        conn.execute("UPDATE kv_entries SET value = ? WHERE key = 'deep'", (DEEP,))
    with pytest.warns(DamagedRowWarning, match=f"skipped KV entry 'deep'.*its stored value {re.escape(TOO_DEEP)}"):
        assert kv.get_all() == {"good": 1}
    assert [row["table"] for row in store.integrity.damaged_rows()] == ["kv_entries"]
