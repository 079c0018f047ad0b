"""The schema declared once: a store written by the last release opens, migrates and keeps working,
and a new one gets exactly the schema that release's store migrates to, on SQLite and on PostgreSQL.

``tests/releases/0.1.0`` holds, as SQL scripts, the schema each backend had under memorylab 0.1.0 and a
few rows that release wrote; the tests build a database from them and open it with today's code.
"""
import sqlite3
import uuid
from contextlib import closing
from pathlib import Path

import psycopg
import pytest

from memorylab import (
    KVStore,
    LongTermMemory,
    Memory,
    MemoryAdmin,
    Session,
    SqliteSearchProvider,
    Store,
)
from memorylab.check import check_database
from memorylab.local_postgres import in_schema
from memorylab.store.ddl import SQLiteDDL
from memorylab.store.migrations import MIGRATIONS, SCHEMA_VERSION, apply_migrations
from memorylab.store.schema import TABLES
from tests.helpers import text_message

RELEASE = Path(__file__).resolve().parents[1] / "releases" / "0.1.0"


def release_script(name):
    return (RELEASE / f"{name}.sql").read_text(encoding="utf-8")


def build_release_database(backend, target):
    """Write the release's database for ``backend`` at ``target`` (a path, or a URL with an empty schema)."""
    if backend == "postgres":
        with psycopg.connect(target, autocommit=True) as conn, conn.transaction():
            conn.execute(release_script("postgres"))
            conn.execute(release_script("rows"))
            for table in TABLES:  # the release's identities had generated the keys the rows hold
                if table.identity and conn.execute("SELECT to_regclass(%s)", (table.name,)).fetchone()[0]:
                    conn.execute(f"SELECT setval(pg_get_serial_sequence('{table.name}', '{table.identity}'),"
                                 f" MAX({table.identity})) FROM {table.name}")
    else:
        with closing(sqlite3.connect(target)) as conn:
            conn.executescript(release_script("sqlite") + release_script("rows"))


def recorded_version(backend, target):
    if backend == "postgres":
        with psycopg.connect(target) as conn:
            return conn.execute("SELECT version FROM memorylab_schema").fetchone()[0]
    with closing(sqlite3.connect(target)) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0]


@pytest.fixture
def empty_postgres_url(postgres_server):
    """A URL whose schema is new and empty (the pool's ``postgres_url`` may hand out a migrated one)."""
    schema = f"release_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield in_schema(postgres_server, schema)
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def release_target(backend, request, db_path):
    target = request.getfixturevalue("empty_postgres_url") if backend == "postgres" else db_path
    build_release_database(backend, target)
    return target


def test_a_store_written_by_the_release_opens_reads_and_writes(backend, release_target):
    with Store(release_target) as store:
        trip = Session.open(store, "trip", tenant_id="acme", agent_id="scout")
        assert [m["id"] for m in trip.get_all_messages()] == ["r1", "a1", "u2", "u2b", "u3"]
        assert [m["id"] for m in trip.get_history("u3", apply_compactions=False)] == ["r1", "a1", "u2", "u3"]
        assert [m["id"] for m in trip.get_history("u2b", apply_compactions=False)] == ["r1", "a1", "u2b"]
        continuing = {row[0] for row in store.fetch_all(
            "SELECT id FROM messages WHERE session_pk = ? AND continues = 1", (trip.pk,))}
        assert continuing == {"a1", "u2"}, "m007 laid the branches out"
        assert [hit["id"] for hit in trip.search("cafe")] == ["r1"]
        assert trip.get_compactions()[0]["summary"] == "The user plans a March trip to Zanzibar."
        assert trip.with_context("notes").get_context_block("notes")["content"] == "Prefers window seats"
        assert KVStore(store, tenant_id="acme", namespace="prefs").get("plain") == [1, 2.5, None]
        assert "Parcels ship with DHL" in SqliteSearchProvider(store, tenant_id="acme", namespace="faq").search("dhl")
        assert Memory(store, agent_id="sales", tenant_id="acme").get("email:ana@example.com")["metadata"][
            "status"] == "qualified"
        assert MemoryAdmin(store, tenant_id="acme").resolve_agent("scout-bot")["name"] == "Scöut Ünicode"
        memory = LongTermMemory(store, workspace="edge")
        recalled = [r["summary"] for r in memory.prepare_request("trip", "Zanzibar")["memories"]]
        assert "Ana's flight to Zanzibar lands at noon" in recalled

        assert trip.append_message(text_message("u4", "Written after the upgrade, about quokkas"))["parent_id"] == "u3"
        assert [hit["id"] for hit in store.search("quokkas", tenant_id="acme")] == ["u4"]
        KVStore(store, tenant_id="acme", namespace="prefs").set("new", {"ok": True})
        assert memory.add_record("A memory added after the upgrade")["id"] == 3
        Session.create(store, "new", tenant_id="acme").append_message(text_message("n1", "hello"))
        assert check_database(store).ok
    assert recorded_version(backend, release_target) == SCHEMA_VERSION, "opening it applied what came since"


# -- the fresh schema is the release's, migrated -------------------------------------------------------

def _normal(sql):
    return " ".join(sql.split())


def _definitions(create_table):
    """The column definitions and constraints of a CREATE TABLE, whitespace normalized, as a set: where
    the text lists them is SQLite's choice for a column added by ALTER TABLE (``table_xinfo`` has the order)."""
    body = create_table[create_table.index("(") + 1:create_table.rindex(")")]
    parts, depth, quoted, start = [], 0, False, 0
    for at, char in enumerate(body):
        if char == "'":
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
        elif not quoted and char == "," and depth == 0:
            parts.append(body[start:at])
            start = at + 1
    parts.append(body[start:])
    return frozenset(_normal(part) for part in parts)


def sqlite_schema(path):
    """Every table (column order, definitions), index, trigger and FTS5 table of a file, and its version."""
    with closing(sqlite3.connect(path)) as conn:
        described = {"user_version": conn.execute("PRAGMA user_version").fetchone()[0]}
        for kind, name, sql in conn.execute("SELECT type, name, sql FROM sqlite_master"):
            if kind == "table" and not sql.startswith("CREATE VIRTUAL"):
                columns = tuple(row[1:] for row in conn.execute(f"PRAGMA table_xinfo('{name}')"))
                described[name] = (columns, _definitions(sql))
            else:
                described[name] = (kind, sql and _normal(sql))
    return described


def postgres_schema(conn):
    """Columns, constraints, indexes and functions of the current schema, free of its name."""
    def rows(sql):
        return sorted(tuple(row) for row in conn.execute(sql).fetchall())

    schema = conn.execute("SELECT current_schema()").fetchone()[0]
    return {
        "columns": rows(
            "SELECT table_name, ordinal_position, column_name, data_type, is_nullable, column_default, is_identity,"
            " identity_generation, is_generated, generation_expression FROM information_schema.columns"
            " WHERE table_schema = current_schema()"),
        "constraints": rows(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE connamespace = current_schema()::regnamespace"),
        "indexes": [(name, definition.replace(f"{schema}.", "")) for name, definition in rows(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()")],
        "functions": [(*row[:-1], _normal(row[-1])) for row in rows(
            "SELECT proname, pg_get_function_arguments(oid), prorettype::regtype::text, provolatile, proparallel,"
            " prosrc FROM pg_proc WHERE pronamespace = current_schema()::regnamespace")],
    }


def test_a_new_sqlite_file_gets_the_schema_the_release_file_migrates_to(tmp_path):
    build_release_database("sqlite", tmp_path / "release.db")
    Store(tmp_path / "release.db").close()
    Store(tmp_path / "new.db").close()
    assert sqlite_schema(tmp_path / "new.db") == sqlite_schema(tmp_path / "release.db")


def test_a_new_postgres_schema_is_the_one_the_release_migrates_to(empty_postgres_url):
    build_release_database("postgres", empty_postgres_url)
    Store(empty_postgres_url).close()
    with psycopg.connect(empty_postgres_url, autocommit=True) as conn:
        release = postgres_schema(conn)
        schema = conn.execute("SELECT current_schema()").fetchone()[0]
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
    Store(empty_postgres_url).close()
    with psycopg.connect(empty_postgres_url) as conn:
        assert postgres_schema(conn) == release


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_a_file_at_any_earlier_version_upgrades_to_the_new_schema(tmp_path, version):
    older = tmp_path / "older.db"
    with closing(sqlite3.connect(older, isolation_level=None)) as conn:
        apply_migrations(SQLiteDDL(conn), MIGRATIONS[:version])
        if version < 4:  # as releases before m004 wrote it
            conn.execute("CREATE INDEX messages_session ON messages (session_pk)")
        conn.execute(f"PRAGMA user_version = {version}")
    Store(older).close()
    Store(tmp_path / "new.db").close()
    assert sqlite_schema(older) == sqlite_schema(tmp_path / "new.db")


def test_what_came_after_a_table_names_the_migration_that_added_it():
    names = {migration.__name__ for migration in MIGRATIONS}
    arrivals = {part.since for table in TABLES for part in (*table.columns, *table.indexes, table.search)
                if part and part.since}
    assert arrivals <= names
