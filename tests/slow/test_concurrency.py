"""Several writers on one store (a file, or a PostgreSQL server) lose nothing, and latest-leaf
appends stay one valid chain."""
import multiprocessing
import threading

from memorylab import Session, Store
from memorylab.check import check_database
from tests.helpers import text_message

PROCESSES = 4
PER_PROCESS = 250


def _append_from_process(path, worker, count):
    with Store(path) as store:
        shared = Session.create(store, "shared")
        own = Session.create(store, f"own-{worker}")
        for i in range(count):
            shared.append_message(text_message(f"p{worker}-{i}", f"worker {worker} message {i}"))
            if i % 10 == 0:
                own.append_message(text_message(f"o{i}", f"own {i}"))


def _assert_one_chain(session, expected):
    messages = session.get_all_messages()
    assert len(messages) == expected
    assert len({m["id"] for m in messages}) == expected
    known = {m["id"] for m in messages}
    assert all(m["parent_id"] is None or m["parent_id"] in known for m in messages)
    # every append went under the newest leaf inside its own transaction: one linear chain
    assert session.get_path_length() == expected
    assert len(session.get_leaves()) == 1


def test_processes_appending_to_one_store_lose_nothing(store_target):
    Store(store_target).close()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append_from_process, args=(str(store_target), w, PER_PROCESS))
               for w in range(PROCESSES)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
        assert worker.exitcode == 0
    with Store(store_target) as store:
        _assert_one_chain(Session.open(store, "shared"), PROCESSES * PER_PROCESS)
        for w in range(PROCESSES):
            assert Session.open(store, f"own-{w}").stats()["messages"] == PER_PROCESS // 10
        assert len(store.search("worker", tenant_id="default")) == 20
        assert check_database(store).ok


def test_threads_sharing_one_store_lose_nothing(store):
    session = Session.create(store, "threads")
    errors = []

    def work(worker):
        try:
            for i in range(200):
                session.append_message(text_message(f"t{worker}-{i}", f"thread {worker} says {i}"))
                if i % 5 == 0:  # reads race the other threads' writes; every append would be O(n^2) reads
                    session.get_history()
        except Exception as error:  # surfaced below; a thread's exception would otherwise vanish
            errors.append(error)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    _assert_one_chain(session, 1200)
