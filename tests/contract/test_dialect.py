"""``store.dialect``: what SQLite and PostgreSQL do differently, asked of each engine itself. Every
expression a dialect writes is run on its own backend, so the two answer the same question alike."""
import sqlite3

import pytest

from memorylab.errors import InvalidInputError, StoreBusyError, StoreError
from memorylab.store.dialect import Dialect, SearchEngine


def value(store, expression, params=None):
    return store.fetch_one(f"SELECT {expression} AS v", params or {})["v"]


def test_each_backend_has_its_own_dialect_naming_its_search_engine(store, backend):
    dialect = store.dialect
    assert isinstance(dialect, Dialect) and isinstance(dialect.search_engine, SearchEngine)
    assert dialect.name == {"sqlite": "sqlite", "postgres": "postgresql"}[backend]
    assert store.search_engine is dialect.search_engine


def test_only_a_server_locks_rows_and_names_and_chains_writes(store, backend):
    dialect = store.dialect
    on_server = backend == "postgres"
    assert bool(dialect.row_lock) is on_server and bool(dialect.name_lock) is on_server
    assert dialect.chained_writes is on_server
    with store.transaction() as conn:
        conn.execute(f"SELECT pk FROM sessions{dialect.row_lock}")
        if dialect.name_lock:
            conn.execute(dialect.name_lock, {"name": "a session"})


def test_no_limit_reads_every_row(store):
    rows = store.fetch_all("SELECT n FROM (SELECT 1 AS n UNION ALL SELECT 2) t ORDER BY n LIMIT :limit",
                           {"limit": store.dialect.no_limit})
    assert [row["n"] for row in rows] == [1, 2]


def test_parameters_are_spelt_for_the_driver_and_a_percent_stays_literal(store, backend):
    native = store.dialect.native("SELECT ? WHERE a = :a AND b LIKE '5%'")
    assert native == {"sqlite": "SELECT ? WHERE a = :a AND b LIKE '5%'",
                      "postgres": "SELECT %s WHERE a = %(a)s AND b LIKE '5%%'"}[backend]
    assert value(store, "CAST(:n AS INTEGER) + 1", {"n": 41}) == 42


@pytest.mark.parametrize("later, earlier", [("2024-05-01T10:00:00+02:00", "2024-05-01T07:59:59Z"),
                                            ("2024-05-01T08:00:00.5Z", "2024-05-01T08:00:00+00:00")])
def test_instants_compare_however_they_are_spelt(store, later, earlier):
    instant = store.dialect.instant
    assert value(store, f"CASE WHEN {instant(':a')} > {instant(':b')} THEN 1 ELSE 0 END",
                 {"a": later, "b": earlier}) == 1


def test_json_reads_a_field_its_values_and_its_words_and_damage_reads_as_nothing(store):
    dialect = store.dialect
    for session_id, metadata in (("good", '{"title": "Trip"}'), ("damaged", "{not json")):
        pk = store.sessions.ensure("default", "default", session_id)
        store.write_one("UPDATE sessions SET metadata = ? WHERE pk = ?", (metadata, pk))
    rows = store.fetch_all(f"SELECT s.session_id, {dialect.json_text('s.metadata', 'title')} AS title FROM sessions s")
    assert {row["session_id"]: row["title"] for row in rows} == {"good": "Trip", "damaged": None}
    rows = store.fetch_all(f"SELECT t.value AS v FROM {dialect.json_values(':tags', 't')} ORDER BY t.value",
                           {"tags": '["b", "a"]'})
    assert [row["v"] for row in rows] == ["a", "b"]
    words = value(store, dialect.json_words(":doc"), {"doc": '{"k": ["Ferry", {"x": "Pier 39"}]}'})
    assert "Ferry" in words and "Pier 39" in words


@pytest.mark.parametrize("pattern, key, matches", [
    ("user:*", "user:1", True), ("user:?", "user:12", False), ("a%b", "a%b", True), ("a%b", "axb", False),
    ("a_b", "axb", False), ("[x]", "[x]", True), ("[x]", "x", False), ("back\\slash", "back\\slash", True),
])
def test_a_glob_matches_stars_and_question_marks_and_nothing_else(store, pattern, key, matches):
    dialect = store.dialect
    assert value(store, f"CASE WHEN {dialect.glob(':key', ':glob')} THEN 1 ELSE 0 END",
                 {"key": key, "glob": dialect.glob_pattern(pattern)}) == int(matches)


def test_full_text_finds_a_message_and_an_empty_query_searches_nothing(session, store):
    session.append_message({"role": "user", "content": "the ferry to Sausalito"})
    assert store.dialect.full_text("messages", "  ") is None
    fts, match = store.dialect.full_text("messages", "ferr")
    rows = store.fetch_all(f"SELECT m.id FROM {fts.source} WHERE {fts.condition} ORDER BY {fts.rank}",
                           {"match": match})
    assert len(rows) == 1


def test_the_search_copy_holds_what_the_engine_can_store(store, backend):
    assert store.dialect.searchable("a\x00b") == {"sqlite": "a\x00b", "postgres": "a\ufffdb"}[backend]


def test_a_bulk_write_merges_the_search_index_where_the_engine_buffers_it(store, backend):
    merge = store.dialect.search_merge("messages")
    assert (merge is None) is (backend == "postgres")
    if merge:
        with store.transaction() as conn:
            conn.execute(merge)


def test_session_rows_between_reads_one_range_of_a_session(session, store):
    for i in range(4):
        session.append_message({"id": f"m{i}", "role": "user", "content": f"{i}"})
    seqs = [row[0] for row in store.fetch_tuples("SELECT seq FROM messages ORDER BY seq")]
    rows = store.fetch_tuples(
        f"SELECT m.id FROM messages m WHERE {store.dialect.session_rows_between('m', ':low', ':high')} ORDER BY m.seq",
        {"pk": session.pk, "low": seqs[1], "high": seqs[2]})
    assert rows == [("m1",), ("m2",)]


def test_a_driver_error_becomes_a_memorylab_error_saying_what_to_do(store, backend):
    dialect = store.dialect
    surrogate = UnicodeEncodeError("utf-8", "a\ud800", 1, 2, "surrogates not allowed")
    assert isinstance(dialect.error(surrogate, where="db", timeout=1), InvalidInputError)
    if backend == "sqlite":
        busy, refused = sqlite3.OperationalError("database is locked"), sqlite3.OperationalError("no such table: x")
    else:
        from psycopg import errors

        busy, refused = errors.LockNotAvailable("lock timeout"), errors.UndefinedTable("relation x does not exist")
    assert isinstance(dialect.error(busy, where="db", timeout=2.5), StoreBusyError)
    assert "2.5 s" in str(dialect.error(busy, where="db", timeout=2.5))
    error = dialect.error(refused, where="lab.db", timeout=1)
    assert type(error) is StoreError and str(error).startswith("lab.db") and "memorylab check" in str(error)
    with pytest.raises(StoreError, match="memorylab check"):
        store.fetch_all("SELECT * FROM no_such_table")
