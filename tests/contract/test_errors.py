"""Faults of the database itself reach the caller as a ``StoreError`` (a ``MemoryLabError``) whose
``__cause__`` is the driver's own error, on both backends: callers catch ``MemoryLabError`` alone."""
import sqlite3

import psycopg
import pytest

from memorylab import Session, Store, StoreBusyError, StoreError, StoreUnavailableError
from memorylab.check import ERROR, check_database
from memorylab.cli import main
from memorylab.store import is_postgres_url
from tests.helpers import text_message
from tests.schema_pool import RECORD_TABLE

DRIVER_ERRORS = (sqlite3.Error, psycopg.Error)


@pytest.fixture
def damaged_target(store_target):
    """``store_target`` for a test that damages it: a PostgreSQL schema loses its version record
    afterwards, so the schema pool drops it instead of handing it to the next test."""
    yield store_target
    if is_postgres_url(str(store_target)):
        with psycopg.connect(str(store_target), autocommit=True) as conn:
            conn.execute(f"DROP TABLE {RECORD_TABLE}")


def drop_table(target, table):
    """Drop ``table`` through a connection of its own, as a careless script would."""
    if is_postgres_url(str(target)):
        with psycopg.connect(str(target), autocommit=True) as conn:
            conn.execute(f"DROP TABLE {table} CASCADE")
    else:
        conn = sqlite3.connect(target, isolation_level=None)
        conn.execute(f"DROP TABLE {table}")
        conn.close()


def assert_chained(error):
    assert isinstance(error, StoreError) and isinstance(error.__cause__, DRIVER_ERRORS), repr(error.__cause__)


def test_a_table_dropped_behind_the_stores_back_fails_reads_and_writes_as_store_errors(store, damaged_target):
    session = Session.create(store, "s")
    session.append_message(text_message("m1", "hello"))
    drop_table(damaged_target, "messages")
    with pytest.raises(StoreError, match="messages") as read:
        session.get_history()
    assert_chained(read.value)
    with pytest.raises(StoreError, match="messages") as write:
        session.append_message(text_message("m2", "again"))
    assert_chained(write.value)


def test_a_writer_kept_waiting_past_the_timeout_is_a_busy_store_error(store_target):
    with Store(store_target, timeout=0.5) as holder, Store(store_target, timeout=0.5) as waiter:
        session = Session.create(holder, "s")
        with holder.transaction() as conn:
            # SQLite's BEGIN IMMEDIATE has locked the whole file; PostgreSQL locks the session's row.
            lock = " FOR UPDATE" if is_postgres_url(str(store_target)) else ""
            conn.execute(f"SELECT 1 FROM sessions WHERE pk = ?{lock}", (session.pk,))
            with pytest.raises(StoreBusyError, match="nothing was changed") as raised:
                Session.open(waiter, "s").append_message(text_message("m", "hello"))
        assert_chained(raised.value)
        Session.open(waiter, "s").append_message(text_message("m", "hello"))


def test_a_check_that_cannot_run_is_an_error_finding(store, damaged_target):
    Session.create(store, "s").append_message(text_message("m1", "hello"))
    drop_table(damaged_target, "compactions")
    report = check_database(store)
    [finding] = [f for f in report.findings if f.check == "overlays"]
    assert finding.severity == ERROR and finding.message.startswith("the check could not run")
    assert "compactions" in finding.message and report.counts is None


def test_the_command_line_reports_a_driver_fault_in_one_line(damaged_target, capsys):
    Store(damaged_target).close()  # a PostgreSQL schema gets its tables when a store first opens it
    drop_table(damaged_target, "messages")
    assert main(["--db", str(damaged_target), "stats"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("memorylab: error:") and "messages" in err


def test_a_file_that_is_not_a_database_is_a_store_error_naming_it(db_path):
    db_path.write_bytes(b"these are not the pages of a database " * 200)
    with pytest.raises(StoreError, match="file is not a database") as raised:
        Store(db_path)
    assert_chained(raised.value)
    assert str(db_path) in str(raised.value) and "restore a backup" in str(raised.value)


def test_a_write_to_a_read_only_database_is_a_store_error_and_reads_go_on(db_path):
    with Store(db_path) as store:
        session = Session.create(store, "s")
        session.append_message(text_message("m1", "hello"))
        # Root ignores file permissions, so the connection is made read-only as SQLite itself does it.
        store.fetch_one("PRAGMA query_only = ON")
        with pytest.raises(StoreError, match="cannot be written") as raised:
            session.append_message(text_message("m2", "again"))
        assert_chained(raised.value)
        assert [m["id"] for m in session.get_history()] == ["m1"]


def test_a_full_disk_is_a_store_error_and_nothing_is_half_written(db_path):
    with Store(db_path) as store:
        session = Session.create(store, "s")
        session.append_message(text_message("m1", "hello"))
        pages = store.fetch_one("PRAGMA page_count")[0]
        store.fetch_one(f"PRAGMA max_page_count = {pages}")  # the file may not grow: a disk with no room left
        with pytest.raises(StoreError, match="full") as raised:
            session.append_message(text_message("m2", "x" * 200_000))
        assert_chained(raised.value)
        store.fetch_one("PRAGMA max_page_count = 1073741823")
        session.append_message(text_message("m3", "room again"))
        assert [m["id"] for m in session.get_history()] == ["m1", "m3"]


def test_a_connection_lost_under_a_call_is_an_unavailable_store_and_the_next_call_reconnects(postgres_url):
    # A connection that dies between calls is replaced before it is handed out (test_store_faults.py);
    # one that dies under a call fails that call.
    with Store(postgres_url) as store:
        session = Session.create(store, "s")
        with pytest.raises(StoreUnavailableError, match="cannot be reached") as raised, store.transaction() as conn:
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
            conn.execute("SELECT 1")
        assert_chained(raised.value)
        session.append_message(text_message("m2", "again"))
        assert [m["id"] for m in session.get_history()] == ["m2"]
