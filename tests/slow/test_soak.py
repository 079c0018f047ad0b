"""Soak: writers, readers and a compaction on one file from separate processes; then nothing is lost.

Four processes append 2,000 messages each to one session, most under the newest leaf and every
40th under an earlier message of their own (a fork), while two processes read histories and
search and one compacts the newest branch in a loop. Also: a lock held past the timeout reaches
the caller as a StoreBusyError that says what to do, never as sqlite3's "database is locked".
"""
import multiprocessing
import random
import sqlite3
import time

import pytest

from memorylab import Session, Store, StoreBusyError, create_compact_function
from memorylab.check import check_database
from tests.helpers import text_message

WRITERS, PER_WRITER, FORK_EVERY = 4, 2000, 40
READERS = 2
SESSION = "soak"


def summarize_plainly(prompt):
    return f"Summary of {len(prompt)} characters of conversation."


def _write(path, worker):
    rng = random.Random(worker)
    with Store(path) as store:
        session = Session.create(store, SESSION)
        for i in range(PER_WRITER):
            message = text_message(f"w{worker}-{i}", f"worker{worker} note {i}", "user" if i % 2 else "assistant")
            if i % FORK_EVERY == FORK_EVERY - 1:
                session.append_message(message, parent_id=f"w{worker}-{rng.randrange(i)}")
            else:
                session.append_message(message)


def _check_chain(path_messages):
    assert path_messages[0]["parent_id"] is None
    for parent, child in zip(path_messages, path_messages[1:]):
        assert child["parent_id"] == parent["id"]


def _read(path, stop, results):
    reads = 0
    try:
        with Store(path) as store:
            session = Session.create(store, SESSION)
            while not stop.is_set():
                leaves = session.get_leaves()
                if leaves:
                    leaf = random.choice(leaves)["id"]
                    _check_chain(session.get_history(leaf, apply_compactions=False))
                    session.get_history(leaf)
                store.search("worker3 note", tenant_id="default")
                session.search("note 17")
                reads += 1
    except Exception as error:  # reported to the parent: any error a reader sees fails the soak
        results.put(("reader error", repr(error)))
    results.put(("reads", reads))


def _compact(path, stop, results):
    overlays = 0
    try:
        with Store(path) as store:
            session = Session.create(store, SESSION).on_compaction(
                create_compact_function(summarize_plainly, protect_head=2, tail_token_budget=300))
            while not stop.is_set():
                if session.get_latest_leaf() is not None and session.compact() is not None:
                    overlays += 1
                time.sleep(0.1)
    except Exception as error:
        results.put(("compaction error", repr(error)))
    results.put(("overlays", overlays))


def _root_walk(parents, leaf):
    """The ids from the root down to ``leaf``, following parent links; fails on a loop or a gap."""
    walk, seen = [], set()
    while leaf is not None:
        assert leaf in parents and leaf not in seen
        seen.add(leaf)
        walk.append(leaf)
        leaf = parents[leaf]
    return walk[::-1]


def test_soak_writers_readers_and_compaction_lose_nothing(db_path):
    Store(db_path).close()
    context = multiprocessing.get_context("spawn")
    stop, results = context.Event(), context.Queue()
    writers = [context.Process(target=_write, args=(str(db_path), w)) for w in range(WRITERS)]
    others = [context.Process(target=_read, args=(str(db_path), stop, results)) for _ in range(READERS)]
    others.append(context.Process(target=_compact, args=(str(db_path), stop, results)))
    started = time.perf_counter()
    for process in writers + others:
        process.start()
    for writer in writers:
        writer.join(timeout=240)
    stop.set()
    for process in others:
        process.join(timeout=60)
    elapsed = time.perf_counter() - started
    assert [p.exitcode for p in writers + others] == [0] * (WRITERS + READERS + 1)
    reports = [results.get(timeout=10) for _ in range(READERS + 1)]
    assert [r for r in reports if r[0].endswith("error")] == []
    assert all(n > 0 for kind, n in reports)
    counts = {kind: sum(n for k, n in reports if k == kind) for kind, _ in reports}

    with Store(db_path) as store:
        session = Session.open(store, SESSION)
        messages = session.get_all_messages()
        expected = {f"w{w}-{i}" for w in range(WRITERS) for i in range(PER_WRITER)}
        assert len(messages) == len(expected) and {m["id"] for m in messages} == expected
        parents = {m["id"]: m["parent_id"] for m in messages}
        assert all(parent is None or parent in parents for parent in parents.values())
        leaves = session.get_leaves()
        assert len(leaves) > WRITERS * PER_WRITER // FORK_EVERY // 2  # the forks really branched
        walks = {leaf["id"]: _root_walk(parents, leaf["id"]) for leaf in leaves}
        assert sum(len(walk) for walk in walks.values()) >= len(messages)
        for leaf in leaves[::10]:
            assert [m["id"] for m in session.get_history(leaf["id"], apply_compactions=False)] == walks[leaf["id"]]
        assert len(session.get_compactions()) == counts["overlays"]
        assert session.get_history()[0]["parent_id"] is None
        assert store.integrity.integrity_errors() == []
        report = check_database(store)
        assert report.ok, str(report)
    print(f"\nsoak: {len(messages)} messages, {len(leaves)} leaves, {counts['overlays']} overlays, "
          f"{counts['reads']} reader passes, {elapsed:.1f} s")


@pytest.fixture
def held_write_lock(db_path):
    """Another connection in the middle of a long write: it holds the file's write lock."""
    with Store(db_path) as store:
        Session.create(store, "s1").append_message(text_message("m1", "before the lock"))
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("UPDATE sessions SET metadata = '{\"busy\": true}'")
    yield other
    other.execute("ROLLBACK")
    other.close()


def test_a_lock_held_past_the_timeout_is_a_clear_error_and_reads_go_on(db_path, held_write_lock):
    with Store(db_path, timeout=0.3) as store:  # opening an up-to-date file takes no write lock
        session = Session.open(store, "s1")
        assert [m["id"] for m in session.get_history()] == ["m1"]
        assert [hit["id"] for hit in store.search("lock", tenant_id="default")] == ["m1"]
        started = time.perf_counter()
        with pytest.raises(StoreBusyError, match=r"locked by another writer for 0.3 s.*larger timeout="):
            session.append_message(text_message("m2", "during the lock"))
        assert 0.25 < time.perf_counter() - started < 5
        held_write_lock.execute("ROLLBACK")
        held_write_lock.execute("BEGIN")  # the fixture's teardown rolls this back
        session.append_message(text_message("m2", "after the lock"))
        assert [m["id"] for m in session.get_history()] == ["m1", "m2"]


def test_a_new_file_locked_by_another_writer_fails_to_open_clearly(tmp_path):
    path = tmp_path / "new.db"
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE placeholder (x)")
    with pytest.raises(StoreBusyError, match="stayed locked"):
        Store(path, timeout=0.2)
    other.execute("ROLLBACK")
    other.close()
    with Store(path, timeout=0.2) as store:
        assert store.sessions.list() == []
