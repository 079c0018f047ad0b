"""Two writers doing the same thing at once, each with a Store of its own (two CI jobs, the lab and the
command line): neither loses its work nor fails on the other's rows.

The interleavings are forced, not hoped for: a barrier holds each trial's first run until the other
trial has started too, and the first import waits, inside its transaction, until the second one is
stuck behind it (on PostgreSQL, until the server says the second connection waits on a lock the
first holds; SQLite's second writer cannot begin before the first commits, so there it has only to
have started)."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from memorylab import Store
from memorylab.experiments import Experiments, register_window_handler
from memorylab.experiments.strategies import WINDOW_HANDLERS
from memorylab.history.window import simple_cut
from memorylab.importers import import_source
from memorylab.io import import_session, read_export
from memorylab.samples import SAMPLE_DIR
from tests.contract.test_import_openai_agents import sdk_session
from tests.helpers import count_rows

PATIENCE = 30
"""Seconds any wait here may take before the test fails instead of hanging."""


def at_once(*calls):
    """Run each call on a thread of its own and return their results, raising the first error."""
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        return [future.result(timeout=PATIENCE * 2) for future in futures]


@pytest.fixture
def first_runs_meet():
    """A window handler where the first run of each of two trials waits for the other's first run."""
    barrier = threading.Barrier(2, timeout=PATIENCE)
    worker = threading.local()  # each trial runs on a pool of its own (concurrency=1): one thread each

    def meet(*arguments):
        if not getattr(worker, "met", False):
            worker.met = True
            barrier.wait()
        return simple_cut(*arguments)

    register_window_handler("meet", meet)
    yield
    WINDOW_HANDLERS.pop("meet")


def migration_spec():
    """The sample spec's migration case under two window arms, each cutting through ``meet``."""
    spec = yaml.safe_load((SAMPLE_DIR / "experiments" / "sample.yaml").read_text(encoding="utf-8"))
    arm = {"strategy": "window", "max_length": 2000, "handler": "meet"}
    return spec | {"arms": [arm | {"name": "cut-a"}, arm | {"name": "cut-b"}],
                   "cases": [case for case in spec["cases"] if case["name"] == "migration"]}


def test_two_trials_started_at_once_take_their_own_numbers_and_keep_every_run(store, store_target,
                                                                              first_runs_meet):
    import_session(store, read_export(SAMPLE_DIR / "sessions" / "long_project.json"))
    spec = migration_spec()

    def trial():
        with Store(store_target) as own:
            return Experiments(own).run(spec, concurrency=1)

    results = at_once(trial, trial)
    assert sorted(r.trial for r in results) == [1, 2]
    assert all(r.complete and len(r.runs) == 2 for r in results)
    experiments = Experiments(store)
    assert [(t["trial"], t["runs"], t["errors"]) for t in experiments.trials("sample")] == [(1, 2, 0), (2, 2, 0)]
    assert {run["arm"] for run in experiments.results("sample", 2).runs} == {"cut-a", "cut-b"}


def blocked_behind(monitor, pid):
    """Whether a connection of the server waits on a lock that the connection ``pid`` holds."""
    waiting = monitor.fetch_one("SELECT COUNT(*) FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))", (pid,))
    return waiting[0] > 0


def test_two_imports_of_one_file_at_once_write_it_once(store, store_target, backend, tmp_path):
    path = tmp_path / "agent.db"
    sdk_session(path, "trip", "Weather in Paris?", "And in Rome?")
    first_in_transaction, second_started = threading.Event(), threading.Event()

    def hold_until_the_second_waits(done):
        """The first import's progress, called once every message is written and before it commits."""
        first_in_transaction.set()
        assert second_started.wait(PATIENCE)
        if backend == "postgres":
            pid = own_stores["first"].fetch_one("SELECT pg_backend_pid()")[0]  # its transaction's connection
            deadline = time.monotonic() + PATIENCE
            with Store(store_target) as monitor:
                while not blocked_behind(monitor, pid):
                    assert time.monotonic() < deadline, "the second import never waited for the first"
                    time.sleep(0.01)

    own_stores = {}

    def first():
        with Store(store_target) as own:
            own_stores["first"] = own
            return import_source(own, path, progress=hold_until_the_second_waits)

    def second():
        with Store(store_target) as own:
            assert first_in_transaction.wait(PATIENCE)
            second_started.set()
            return import_source(own, path)

    reports = at_once(first, second)
    assert [r.messages_added for r in reports] == [10, 0]
    assert [s.status for s in reports[1].sessions] == ["unchanged"]
    assert (count_rows(store, "sessions"), count_rows(store, "messages")) == (1, 10)
