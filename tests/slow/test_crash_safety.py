"""SIGKILL in the middle of writes: the file stays sound and every write is all or nothing.

Crashes injected: a 50,000-message import killed inside its transaction (once at a known row,
once as a real `memorylab import` process caught writing), a compaction killed while its
summarizer runs and once inside the overlay's transaction, and an appending process killed at
three random moments.
"""
import itertools
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memorylab import Session, Store, create_compact_function, import_session, read_export
from memorylab.check import check_database
from memorylab.store import sessions as session_rows
from memorylab.store.sessions import SqlSessionStorage
from tests.helpers import database_rows, text_message

IMPORT_SIZE = 50_000
KILL_AFTER_ROWS = 25_000
APPENDER_KILLS = 3





def assert_sound(path):
    with Store(path) as store:
        report = check_database(store)
    assert report.ok, str(report)


@pytest.fixture
def existing(db_path):
    """A file that already holds a conversation: a crash must not touch it."""
    with Store(db_path) as store:
        session = Session.create(store, "existing")
        for i in range(40):
            session.append_message(text_message(f"e{i}", f"existing message {i}"))
    return db_path


def kill(process):
    os.kill(process.pid, signal.SIGKILL)
    process.join(timeout=30)
    assert process.exitcode == -signal.SIGKILL


def start(target, *args):
    process = multiprocessing.get_context("spawn").Process(target=target, args=args)
    process.start()
    return process


# -- a large import --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def big_export(tmp_path_factory):
    """A 50,000-message export: one long branch with a fork every 1,000 messages."""
    messages = []
    for i in range(IMPORT_SIZE):
        parent = None if i == 0 else f"b{i - 500 if i % 1000 == 0 else i - 1}"
        messages.append({"id": f"b{i}", "parent_id": parent, "role": "user" if i % 2 else "assistant",
                         "parts": [{"type": "text", "text": f"imported message {i} about the schema migration"}],
                         "created_at": "2025-03-01T12:00:00.000Z", "metadata": {"n": i}})
    path = tmp_path_factory.mktemp("exports") / "big.json"
    path.write_text(json.dumps({"format": "memorylab.session", "version": 1, "session": {"id": "big"},
                                "messages": messages}))
    return path


def _import_and_hang(path, export_path, inserted):
    """Import, but stop inside the transaction after KILL_AFTER_ROWS rows and wait to be killed."""
    real_row, rows = session_rows.message_row, itertools.count(1)

    def message_row(*args):
        # Rows are produced one at a time as the import inserts them: this one follows KILL_AFTER_ROWS.
        if next(rows) == KILL_AFTER_ROWS + 1:
            inserted.set()
            time.sleep(300)
        return real_row(*args)

    session_rows.message_row = message_row
    with Store(path) as store:
        import_session(store, read_export(export_path))


def test_an_import_killed_halfway_leaves_no_trace(existing, big_export):
    before = database_rows(existing)
    inserted = multiprocessing.get_context("spawn").Event()
    process = start(_import_and_hang, str(existing), str(big_export), inserted)
    assert inserted.wait(timeout=120), "the import never reached its rows"
    kill(process)
    assert database_rows(existing) == before
    assert_sound(existing)


def test_a_real_import_process_killed_while_writing_is_all_or_nothing(existing, big_export):
    before = database_rows(existing)
    wal = Path(f"{existing}-wal")
    process = subprocess.Popen([sys.executable, "-m", "memorylab", "--db", str(existing), "import", str(big_export)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    # Uncommitted pages spill into the WAL once the page cache is full: the import is writing.
    while not (wal.exists() and wal.stat().st_size > 1_000_000):
        assert process.poll() is None, "the import finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    process.kill()
    assert process.wait(timeout=30) == -signal.SIGKILL
    assert database_rows(existing) == before
    assert_sound(existing)
    with Store(existing) as store:  # nothing half-written is left in the way of a second try
        assert import_session(store, read_export(big_export)).stats()["messages"] == IMPORT_SIZE
    assert_sound(existing)


# -- compaction --------------------------------------------------------------------------------------

def _compact(path, reached, hang_in):
    """Compact ``existing``, hanging in the summarizer or inside the overlay's transaction."""
    def summarize(prompt):
        if hang_in == "summarizer":
            reached.set()
            time.sleep(300)
        return "The user and the assistant exchanged forty numbered messages."

    if hang_in == "transaction":
        real_get = SqlSessionStorage.get_overlay

        def get_overlay(self, *args):  # called inside add_overlay's transaction, after the INSERT
            real_get(self, *args)
            reached.set()
            time.sleep(300)

        SqlSessionStorage.get_overlay = get_overlay
    with Store(path) as store:
        session = Session.open(store, "existing").on_compaction(
            create_compact_function(summarize, protect_head=2, tail_token_budget=50))
        session.compact()


@pytest.mark.parametrize("hang_in", ["summarizer", "transaction"])
def test_a_compaction_killed_midway_leaves_no_partial_overlay(existing, hang_in):
    before = database_rows(existing)
    reached = multiprocessing.get_context("spawn").Event()
    process = start(_compact, str(existing), reached, hang_in)
    assert reached.wait(timeout=60)
    kill(process)
    assert database_rows(existing) == before
    with Store(existing) as store:
        session = Session.open(store, "existing")
        assert session.get_compactions() == []
        assert [m["id"] for m in session.get_history()] == [f"e{i}" for i in range(40)]
    assert_sound(existing)


# -- appends --------------------------------------------------------------------------------------

def _append_forever(path, first):
    with Store(path) as store:
        session = Session.open(store, "existing")
        for i in itertools.count(first):
            session.append_message(text_message(f"a{i}", f"appended {i}"))


def test_an_appender_killed_at_random_moments_loses_only_the_message_in_flight(existing):
    rng = random.Random(12)
    appended = 0
    for _ in range(APPENDER_KILLS):
        process = start(_append_forever, str(existing), appended)
        with Store(existing) as store:
            session = Session.open(store, "existing")
            while session.stats()["messages"] < 40 + appended + 100:
                assert process.is_alive(), "the appender died on its own"
                time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.3))
        kill(process)
        with Store(existing) as store:
            session = Session.open(store, "existing")
            ids = [m["id"] for m in session.get_history()]
        appended = len(ids) - 40
        assert ids == [f"e{i}" for i in range(40)] + [f"a{i}" for i in range(appended)]
        assert_sound(existing)
