"""A long branch is read without Python's cyclic garbage collector walking the heap over and over
(each message is a few new containers; a 20,000-message read spent half its time collecting), and
the collector is left as the read found it, whichever threads read at once."""
import gc
import threading

import pytest

from memorylab import import_session
from memorylab.collector import collector_paused
from memorylab.io import EXPORT_FORMAT, EXPORT_VERSION

MESSAGES = 3_000


@pytest.fixture
def long_branch(store):
    """One branch of ``MESSAGES`` messages under an overlay."""
    messages = [{"id": f"m{i}", "parent_id": f"m{i - 1}" if i else None, "role": ("user", "assistant")[i % 2],
                 "parts": [{"type": "text", "text": f"message {i}"}], "created_at": "2026-01-01T00:00:00.000Z"}
                for i in range(MESSAGES)]
    session = import_session(store, {"format": EXPORT_FORMAT, "version": EXPORT_VERSION,
                                     "session": {"id": "long"}, "messages": messages})
    session.add_compaction("the first hundred", "m0", "m99")
    return session


@pytest.fixture
def collections():
    """The collections that start while a test runs, counted by the collector's own callback."""
    started = []

    def count(phase, info):
        if phase == "start":
            started.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    yield started
    gc.callbacks.remove(count)


def test_reading_a_long_branch_collects_no_garbage_and_leaves_the_collector_on(long_branch, collections):
    assert gc.isenabled()
    history = long_branch.get_history()
    assert len(history) == MESSAGES - 99
    assert collections in ([], [0])  # at most the young generation, once, as the read ends
    assert gc.isenabled()


def test_a_collector_turned_off_by_the_caller_stays_off(long_branch):
    gc.disable()
    try:
        long_branch.get_history()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_pauses_from_two_threads_nest_and_the_last_one_turns_it_back_on():
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def second():
        first_in.wait()
        with collector_paused():
            second_in.set()
            first_out.wait()
            seen["after the first left"] = gc.isenabled()

    thread = threading.Thread(target=second)
    thread.start()
    with collector_paused():
        first_in.set()
        second_in.wait()
    first_out.set()
    thread.join()
    assert seen == {"after the first left": False} and gc.isenabled()
