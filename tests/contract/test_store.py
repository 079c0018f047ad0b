import sqlite3

import pytest

from memorylab import MemoryLabError, Session, Store
from memorylab.store import ALL_TENANTS
from memorylab.store.migrations import SCHEMA_VERSION
from tests.helpers import count_rows, text_message


def test_new_file_gets_wal_foreign_keys_and_the_schema_version(db_path):
    with Store(db_path) as store:
        pragma = lambda name: store.db.execute(f"PRAGMA {name}").fetchone()[0]  # noqa: E731
        assert pragma("journal_mode") == "wal"
        assert pragma("foreign_keys") == 1
        assert pragma("busy_timeout") >= 1000
        assert pragma("user_version") == SCHEMA_VERSION
        assert {"sessions", "messages", "compactions", "context_blocks", "messages_fts"} <= set(
            store.db.table_names())


def test_reopening_applies_no_migration_twice(store_target):
    with Store(store_target) as store:
        Session.create(store, "s").append_message(text_message("m", "kept"))
    with Store(store_target) as store:
        assert Session.open(store, "s").get_message("m")["parts"][0]["text"] == "kept"


def test_a_newer_schema_is_refused_clearly(db_path):
    Store(db_path).close()
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(MemoryLabError, match="newer than this memorylab"):
        Store(db_path)


def test_memory_store_works_without_a_file():
    with Store(":memory:") as store:
        s = Session.create(store, "m")
        s.append_message(text_message("a", "in memory"))
        assert [h["id"] for h in s.search("memory")] == ["a"]


def test_deleting_a_session_cascades_to_messages_and_search(store):
    s = Session.create(store, "gone")
    s.append_message(text_message("a", "ephemeral words"))
    s.add_compaction("x", "a", "a")
    s.storage.delete()
    assert store.search("ephemeral", tenant_id=ALL_TENANTS) == []
    assert count_rows(store, "compactions") == count_rows(store, "messages") == 0


def test_list_sessions_counts_messages_branches_and_tokens(store):
    s = Session.create(store, "tree", agent_id="bot", metadata={"title": "A tree"})
    root = s.append_message(text_message("r", "root"))
    s.append_message(text_message("a", "answer one", "assistant"))
    s.append_message(text_message("b", "answer two", "assistant"), parent_id=root["id"])
    Session.create(store, "empty", tenant_id="other")
    rows = {r["session_id"]: r for r in store.sessions.list()}
    assert rows["tree"]["message_count"] == 3
    assert rows["tree"]["branch_count"] == 2
    assert rows["tree"]["tokens"] == sum(m["tokens"] for m in s.get_all_messages())
    assert rows["tree"]["metadata"] == {"title": "A tree"}
    assert rows["empty"]["message_count"] == 0 and rows["empty"]["branch_count"] == 0
    assert [r["session_id"] for r in store.sessions.list(tenant_id="other")] == ["empty"]


def test_a_failed_write_leaves_nothing_behind(store):
    s = Session.create(store, "atomic")
    s.append_message(text_message("a", "first"))
    with pytest.raises(RuntimeError):
        with store.transaction():
            s.append_message(text_message("b", "second"))
            raise RuntimeError("boom")
    assert [m["id"] for m in s.get_all_messages()] == ["a"]
    s.append_message(text_message("c", "third"))
    assert [m["id"] for m in s.get_history()] == ["a", "c"]


def test_sessions_are_searched_by_id_or_title_and_paged_in_sql(store):
    for number in range(12):
        Session.create(store, f"chat-{number:02d}", metadata={"title": f"Order_{number} 100% done" if number % 3 == 0
                                                               else f"Question {number}"})
    newest_first = [f"chat-{number:02d}" for number in reversed(range(12))]
    assert [r["session_id"] for r in store.sessions.list(limit=5)] == newest_first[:5]
    assert [r["session_id"] for r in store.sessions.list(limit=5, offset=10)] == newest_first[10:]
    assert ([r["session_id"] for r in store.sessions.list(search="ORDER_")]
            == ["chat-09", "chat-06", "chat-03", "chat-00"])
    assert [r["session_id"] for r in store.sessions.list(search="100%", limit=2)] == ["chat-09", "chat-06"]
    assert store.sessions.count(search="100%") == 4 and store.sessions.count(search="Order%") == 0
    assert [r["session_id"] for r in store.sessions.list(search="chat-1")] == ["chat-11", "chat-10"]
    assert store.sessions.count() == 12 and store.sessions.count(tenant_id="other") == 0
    assert store.sessions.list(search="_") == store.sessions.list(search="order_")

