"""Faults of the database's surroundings, each said by its own error with what to do: a PostgreSQL
server that restarts or ends a connection, a full disk, a read-only file or folder, and another
process holding SQLite's write lock (which must not hold up this store's readers)."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from memorylab import (
    Session,
    Store,
    StoreBusyError,
    StoreError,
    StoreFullError,
    StoreReadOnlyError,
    StoreUnavailableError,
    local_postgres,
)
from tests.helpers import text_message

LOCK_TIMEOUT = 30.0
"""The stores' default timeout: what an outage used to cost every call."""


@pytest.fixture(scope="module")
def own_server():
    """A PostgreSQL server of this module's own, to restart: the session's server serves other tests."""
    directory = tempfile.mkdtemp(prefix="memorylab-pg-faults-")
    try:
        yield directory, local_postgres.start(directory)
    finally:
        local_postgres.stop(directory)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def own_url(own_server, request):
    """A schema of its own on ``own_server`` for one test."""
    _, url = own_server
    schema = f"faults_{request.node.name.lower().replace('-', '_')[:40]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
    return local_postgres.in_schema(url, schema)


def warm_pool(store, connections=6):
    """Use ``connections`` pooled connections at once, so that the pool holds that many afterwards."""
    barrier = threading.Barrier(connections)

    def hold_one(_):
        with store.snapshot():
            barrier.wait(timeout=10)
            return store.fetch_one("SELECT 1")[0]

    with ThreadPoolExecutor(connections) as pool:
        assert list(pool.map(hold_one, range(connections))) == [1] * connections
    assert store._pool.get_stats()["pool_size"] >= connections


def failed_calls(store, count=20):
    """How many of ``count`` appends and reads, from several threads at once, raise."""
    session = Session.open(store, "s")

    def call(i):
        try:
            session.append_message(text_message(f"after-{i}", "hello again"), parent_id=None)
            return len(session.get_history(f"after-{i}")) != 1
        except StoreError:
            return True

    with ThreadPoolExecutor(4) as pool:
        return sum(pool.map(call, range(count)))


def timed(call):
    start = time.perf_counter()
    with pytest.raises(StoreUnavailableError, match="cannot be reached, or is shutting down") as raised:
        call()
    return time.perf_counter() - start, raised.value


def test_a_restart_is_said_at_once_and_no_call_fails_once_the_server_is_back(own_server, own_url):
    directory, _ = own_server
    with Store(own_url) as store:
        session = Session.create(store, "s")
        session.append_message(text_message("m1", "before the restart"))
        warm_pool(store)
        local_postgres.stop(directory, mode="fast")
        try:
            read, error = timed(session.get_history)
            write, _ = timed(lambda: session.append_message(text_message("m2", "during the outage")))
            opening, _ = timed(lambda: Store(own_url))
        finally:
            local_postgres.start(directory)
        assert max(read, write, opening) < LOCK_TIMEOUT / 10, (read, write, opening)
        assert isinstance(error, StoreError) and isinstance(error.__cause__, psycopg.Error)
        assert failed_calls(store) == 0
        assert [m["id"] for m in session.get_history("m1")] == ["m1"]


def test_killed_connections_cost_no_call(own_url):
    with Store(own_url) as store:
        Session.create(store, "s")
        warm_pool(store)
        with psycopg.connect(own_url, autocommit=True) as admin:
            pids = [row[0] for row in admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")]
            assert len(pids) >= 6
            for pid in pids:  # each waits until its backend has gone
                assert admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone()[0]
        assert failed_calls(store) == 0


def test_a_full_disk_is_a_full_store_error_nothing_is_written_and_freeing_space_is_enough(db_path):
    with Store(db_path) as store:
        session = Session.create(store, "s")
        session.append_message(text_message("m1", "hello"))
        pages = store.fetch_one("PRAGMA page_count")[0]
        # The writer connection may not grow the file: SQLite's own "database or disk is full".
        store._conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StoreFullError, match="nothing was written; free some space and retry") as raised:
            session.append_message(text_message("m2", "x" * 200_000))
        assert isinstance(raised.value, StoreError)
        assert [m["id"] for m in session.get_history()] == ["m1"]
        assert store.fetch_one("PRAGMA page_count")[0] == pages
        store._conn.execute("PRAGMA max_page_count = 1073741823")
        session.append_message(text_message("m2", "x" * 200_000))
        assert [m["id"] for m in session.get_history()] == ["m1", "m2"]


FULL_DISK_CHILD = """
import json, resource, sys
from memorylab import Session, Store, StoreFullError
# No file of this process may grow past 16 KiB: not the WAL, not the 32 KiB shared-memory index
# that opening a WAL file starts. SQLite meets this as it meets a full disk.
resource.setrlimit(resource.RLIMIT_FSIZE, (16384, resource.RLIM_INFINITY))
with Store(sys.argv[1]) as store:
    session = Session.open(store, "s")
    result = {"read_only": store.read_only, "history": [m["id"] for m in session.get_history()]}
    try:
        session.append_message({"id": "m2", "role": "user", "parts": [{"type": "text", "text": "no room"}]})
    except StoreFullError as error:
        result["write"] = str(error)
print(json.dumps(result))
"""


def test_a_database_on_a_full_disk_opens_for_reading(db_path):
    with Store(db_path) as store:
        Session.create(store, "s").append_message(text_message("m1", "hello"))
    child = subprocess.run([sys.executable, "-c", FULL_DISK_CHILD, str(db_path)], capture_output=True, text=True,
                           timeout=60)
    assert child.returncode == 0, child.stderr
    result = json.loads(child.stdout)
    assert result["read_only"] and result["history"] == ["m1"]
    assert "disk is full" in result["write"] and "free some space" in result["write"]
    with Store(db_path) as store:
        assert not store.read_only
        session = Session.open(store, "s")
        session.append_message(text_message("m2", "room again"))
        assert [m["id"] for m in session.get_history()] == ["m1", "m2"]


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def written(tmp_path):
    """A database in a folder of its own, holding one session of one message; permissions given back after."""
    path = tmp_path / "folder" / "lab.db"
    with Store(path) as store:
        Session.create(store, "s").append_message(text_message("m1", "hello"))
    yield path
    os.chmod(path.parent, 0o755)
    os.chmod(path, 0o644)


def assert_reads_but_never_writes(path, **options):
    with Store(path, **options) as store:
        assert store.read_only
        session = Session.open(store, "s")
        with ThreadPoolExecutor(2) as pool:  # the reader connections are read-only too
            assert list(pool.map(lambda _: [m["id"] for m in session.get_history()], range(2))) == [["m1"]] * 2
        with pytest.raises(StoreReadOnlyError, match="opened read-only|read_only=True") as raised:
            session.append_message(text_message("m2", "again"))
        assert isinstance(raised.value, StoreError) and "nothing was written" in str(raised.value)
        with pytest.raises(StoreReadOnlyError):
            Session.create(store, "other")
        assert [m["id"] for m in session.get_history()] == ["m1"]


def test_a_write_protected_file_opens_reads_and_refuses_writes(written):
    # Root may write any file; a file no one has a write bit on is opened read-only for root as well.
    os.chmod(written, 0o444)
    before = digest(written)
    assert_reads_but_never_writes(written)
    assert digest(written) == before


def test_a_file_in_a_write_protected_folder_opens_without_writing_anything_there(written):
    os.chmod(written.parent, 0o555)
    before = {path.name: digest(path) for path in written.parent.iterdir()}
    assert_reads_but_never_writes(written)
    assert {path.name: digest(path) for path in written.parent.iterdir()} == before


def test_read_only_true_opens_a_writable_file_for_reading_only(written):
    before = digest(written)
    assert_reads_but_never_writes(written, read_only=True)
    assert digest(written) == before
    with Store(written) as store:
        assert not store.read_only


HOLD_THE_WRITE_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
conn.execute("ROLLBACK")
"""


@pytest.fixture
def locked_by_another_process(db_path):
    """``db_path`` with one session, and another process holding its write lock until the test ends."""
    with Store(db_path) as store:
        Session.create(store, "s").append_message(text_message("m1", "hello"))
    holder = subprocess.Popen([sys.executable, "-c", HOLD_THE_WRITE_LOCK, str(db_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "locked\n"
    yield db_path
    holder.communicate("", timeout=10)


def wait_until_held_by_another_thread(lock):
    while lock.acquire(blocking=False):
        lock.release()
        time.sleep(0.005)


def test_reads_from_other_threads_go_on_while_a_write_waits_for_another_process(locked_by_another_process):
    with Store(locked_by_another_process, timeout=2.0) as store:
        session = Session.open(store, "s")

        def write():
            start = time.perf_counter()
            with pytest.raises(StoreBusyError, match="nothing was changed"):
                session.append_message(text_message("m2", "waits"))
            return time.perf_counter() - start

        def read(_):
            start = time.perf_counter()
            ids = [m["id"] for m in session.get_history()]
            listed = [row["session_id"] for row in store.sessions.list()]
            return time.perf_counter() - start, ids, listed

        with ThreadPoolExecutor(3) as pool:
            waiting = pool.submit(write)
            wait_until_held_by_another_thread(store._lock)  # the write holds this store's writer connection
            reads = list(pool.map(read, range(2)))
            waited = waiting.result()
        assert [(ids, listed) for _, ids, listed in reads] == [(["m1"], ["s"])] * 2
        assert max(seconds for seconds, _, _ in reads) < 0.5, reads
        assert 2.0 <= waited < 10, waited


def test_reads_in_a_write_transaction_see_its_rows_and_other_threads_do_not_wait_for_it(db_path):
    with Store(db_path) as store:
        session = Session.create(store, "s")
        session.append_message(text_message("m1", "hello"))
        with ThreadPoolExecutor(1) as other, store.transaction():
            session.append_message(text_message("m2", "not committed yet"))
            assert [m["id"] for m in session.get_history()] == ["m1", "m2"]
            assert other.submit(lambda: [m["id"] for m in session.get_history("m1")]).result(timeout=5) == ["m1"]
            assert other.submit(lambda: session.storage.latest_leaf_id()).result(timeout=5) == "m1"
        assert [m["id"] for m in session.get_history()] == ["m1", "m2"]
