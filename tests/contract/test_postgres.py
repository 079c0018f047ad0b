"""What only the PostgreSQL backend has to prove: its URL handling, its refusals, its locks, and
search that stays safe for any string. The shared contract runs on it through the ``store`` fixture."""
import threading

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memorylab import InvalidInputError, MemoryLabError, Session, SqliteSearchProvider, Store, StoreBusyError
from memorylab.memory.longterm import LongTermMemory
from memorylab.store.migrations import SCHEMA_VERSION
from memorylab.store.postgres import PostgresStore, redact
from tests.helpers import count_rows, examples, ids, text_message


def test_a_url_opens_postgres_and_a_path_opens_sqlite(postgres_url, db_path):
    with Store(postgres_url) as store, Store(db_path) as file_store:
        assert isinstance(store, PostgresStore)
        assert type(file_store).__name__ == "SQLiteStore"
        assert store.search_engine.name == "postgres-tsvector" and file_store.search_engine.name == "fts5"


@pytest.mark.parametrize("url, shown", [
    ("postgresql://ada:s3cret@db.example:5432/memory", "postgresql://ada@db.example:5432/memory"),
    ("postgres://ada@db.example/memory?password=s3cret&sslmode=require",
     "postgres://ada@db.example/memory?sslmode=require"),
    ("postgresql://ada:p%40ss@/memory?host=/run/postgresql", "postgresql://ada@/memory?host=/run/postgresql"),
])
def test_a_password_is_never_shown(url, shown):
    assert redact(url) == shown


def test_an_unreachable_server_is_one_clear_error_without_the_password(tmp_path):
    with pytest.raises(MemoryLabError) as raised:
        Store(f"postgresql://ada:s3cret@/memory?host={tmp_path}", timeout=2)
    message = str(raised.value)
    assert message.startswith(f"cannot open the PostgreSQL store postgresql://ada@/memory?host={tmp_path}:")
    assert "s3cret" not in message and "\n" not in message


def test_the_schema_version_lives_in_a_table_and_a_newer_one_is_refused(postgres_url):
    Store(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM memorylab_schema").fetchall() == [(SCHEMA_VERSION,)]
        conn.execute("UPDATE memorylab_schema SET version = version + 1")
    with pytest.raises(MemoryLabError, match="newer than this memorylab"):
        Store(postgres_url)


def test_stores_opened_side_by_side_migrate_once(postgres_url):
    stores, errors = [], []

    def open_store():
        try:
            stores.append(Store(postgres_url))
        except Exception as error:  # surfaced below
            errors.append(error)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(stores) == 4
    Session.create(stores[0], "s").append_message(text_message("m", "hello"))
    assert [h["id"] for h in stores[3].search("hello", tenant_id="default")] == ["m"]
    for store in stores:
        store.close()


def test_nul_characters_keep_the_message_and_refuse_plain_text_columns(postgres_url):
    with Store(postgres_url) as store:
        session = Session.create(store, "nul")
        session.append_message(text_message("m", "before\x00after words"))
        assert session.get_message("m")["parts"][0]["text"] == "before\x00after words"
        assert [h["content"] for h in session.search("after")] == ["before\ufffdafter words"]
        with pytest.raises(InvalidInputError, match="NUL character"):
            session.storage.blocks.set_content("memory", "a\x00b")
        with pytest.raises(InvalidInputError, match="NUL character"):
            session.add_compaction("summary\x00", "m", "m")
        assert session.storage.blocks.content("memory") is None and session.get_compactions() == []
        assert count_rows(store, "messages") == 1


def test_a_held_session_lock_becomes_a_busy_error_and_nothing_is_written(postgres_url):
    with Store(postgres_url, timeout=1) as store:
        session = Session.create(store, "locked")
        session.append_message(text_message("a", "first"))
        with psycopg.connect(postgres_url) as other:
            other.execute("SELECT 1 FROM sessions WHERE pk = %s FOR UPDATE", (session.pk,))
            with pytest.raises(StoreBusyError, match="another writer"):
                session.append_message(text_message("b", "second"))
            assert [m["id"] for m in session.get_all_messages()] == ["a"]
        session.append_message(text_message("b", "second"))
        assert ids(session.get_history()) == ["a", "b"]


def test_overlays_and_appends_from_many_threads_keep_their_numbering(postgres_url):
    with Store(postgres_url) as store:
        session = Session.create(store, "busy")
        session.append_message(text_message("root", "root"))
        errors = []

        def append(worker):
            try:
                for i in range(30):
                    session.append_message(text_message(f"w{worker}-{i}", f"message {i}"))
            except Exception as error:  # surfaced below
                errors.append(error)

        def summarize():
            try:
                for _ in range(15):
                    session.add_compaction("so far", "root", "root")
            except Exception as error:  # surfaced below
                errors.append(error)

        threads = [threading.Thread(target=append, args=(w,)) for w in range(4)]
        threads += [threading.Thread(target=summarize) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert [c["id"] for c in session.get_compactions()] == list(range(1, 31))
        assert session.get_path_length() == 121 and len(session.get_leaves()) == 1


@pytest.fixture(scope="module")
def searchable(postgres_server):
    """One schema for every generated query: messages, keyed entries and long-term records."""
    schema = "hostile_search"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
    from memorylab.local_postgres import in_schema

    store = Store(in_schema(postgres_server, schema))
    session = Session.create(store, "searched")
    for i, text in enumerate(["the quick brown fox", "NEAR(a b) OR \"quoted\" text:column", "日本語のテキスト",
                              "émigré café naïve", "a*b^c -d +e (f) {g} [h] <-> !x & y | z", "don't \\ stop"]):
        session.append_message(text_message(f"m{i}", text))
    entries = SqliteSearchProvider(store)
    entries.set("refunds", "refunds take five days")
    memory = LongTermMemory(store, workspace="hostile")
    memory.add_record("the user prefers e-mail about refunds", tags=["contact"])
    yield store, session, entries, memory
    store.close()
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text() | st.sampled_from(["'", "''", "\\", "!", "&", "|", "<->", "<1>", ":*", "a:*b", "(", "'a' & 'b'",
                                    "x' | 'y", "\\'", "!!!", "& | !", "-", "'; DROP TABLE messages; --"]))
def test_search_never_raises_on_any_text(searchable, query):
    store, session, entries, memory = searchable
    for hits in (store.search(query, tenant_id="default"), session.search(query),
                 store.entries.search("default", "knowledge", query),
                 memory.store.long_term.candidates(memory.workspace, "GLOBAL_MEMORY", None, query=query)):
        assert isinstance(hits, list)


def test_search_folds_accents_and_keeps_operators_as_words(searchable):
    store, session, entries, memory = searchable
    assert ids(session.search("cafe naive")) == ["m3"]
    assert ids(session.search("<-> !x")) == ["m4"]
    assert ids(session.search("don't")) == ["m5"]
    assert ids(session.search("日本語")) == ["m2"]
    assert [e["key"] for e in store.entries.search("default", "knowledge", "five day")] == ["refunds"]
    assert "refunds take five days" in entries.search("refund")
    found = memory.store.long_term.candidates(memory.workspace, "GLOBAL_MEMORY", None, query="email about refund")
    assert [r["summary"] for r in found] == ["the user prefers e-mail about refunds"]
