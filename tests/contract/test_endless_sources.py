"""A source that never ends: a SQLite source whose joined table is a view that recurses forever, or
one that fills the disk with temporary files. It is read before the import's write transaction, so
other writers go on; its read is stopped by the budget, with an ImportFormatError naming the file, or
by Ctrl-C; and nothing is written.

The child processes run the real command line, so a source that is not stopped cannot hang the tests:
they are killed after ``PATIENCE`` seconds.
"""
import asyncio
import signal
import sqlite3
import subprocess
import time

import pytest
from agents import SQLiteSession

from memorylab import ImportFormatError, Session, Store
from memorylab.importers import ReadBudget, import_source
from tests.helpers import database_rows, memorylab_process, text_message

PATIENCE = 60
FOREVER = ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
           "SELECT 'trip' AS session_id, n AS created_at FROM r")
"""Rows without end, none of them produced until the join is done (it never is)."""
FILLING = ("WITH RECURSIVE r(n, pad) AS (SELECT 1, randomblob(200) UNION SELECT n + 1, randomblob(200) FROM r) "
           "SELECT 'trip' AS session_id, n AS created_at FROM r")
"""Rows without end that UNION keeps, to tell them apart, in SQLite's temporary files."""


def endless_sdk_source(path, view):
    """An Agents SDK database whose sessions table, which the import joins, is ``view``."""
    session = SQLiteSession("trip", str(path))
    asyncio.run(session.add_items([{"role": "user", "content": "Weather in Paris?"}]))
    session.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE agent_sessions")
        conn.execute(f"CREATE VIEW agent_sessions AS {view}")
    conn.close()
    return path


def memorylab_cli(db, *argv, **env):
    return memorylab_process("--db", str(db), *argv, env=env)


def finished(child, within=PATIENCE):
    """The child's (return code, stderr), once it ends; killed and failed when it runs on."""
    try:
        _, err = child.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail(f"the import was still running after {within} s")
    return child.returncode, err


def test_the_read_budget_stops_an_endless_source_naming_it(store_target, tmp_path):
    source = endless_sdk_source(tmp_path / "agent.db", FOREVER)
    with Store(store_target) as store:
        before = database_rows(store_target)
        started = time.monotonic()
        with pytest.raises(ImportFormatError, match=rf"{source}: reading it took longer than 1 s .*"
                                                    r"--max-read-seconds / \$MEMORYLAB_IMPORT_MAX_SECONDS"):
            import_source(store, source, budget=ReadBudget(seconds=1))
        assert time.monotonic() - started < 10
        assert database_rows(store_target) == before


def test_the_budget_set_in_the_environment_stops_the_command_line_dry_run(db_path, tmp_path):
    Store(db_path).close()
    source = endless_sdk_source(tmp_path / "agent.db", FOREVER)
    code, err = finished(memorylab_cli(db_path, "import", str(source), "--dry-run", MEMORYLAB_IMPORT_MAX_SECONDS="1"))
    assert code == 1 and f"{source}: reading it took longer than 1 s" in err and "nothing was imported" in err


def test_the_disk_budget_stops_a_source_filling_temporary_files(store, tmp_path):
    source = endless_sdk_source(tmp_path / "agent.db", FILLING)
    with pytest.raises(ImportFormatError, match=rf"{source}: reading it filled more than 20,000,000 bytes of disk"):
        import_source(store, source, budget=ReadBudget(seconds=PATIENCE, max_bytes=20_000_000))


def test_other_writers_go_on_while_a_source_is_read(db_path, tmp_path):
    with Store(db_path) as store:
        Session.create(store, "mine")
    source = endless_sdk_source(tmp_path / "agent.db", FOREVER)
    child = memorylab_cli(db_path, "import", str(source), MEMORYLAB_IMPORT_MAX_SECONDS="8")
    try:
        with Store(db_path, timeout=2) as store:
            session = Session.open(store, "mine")
            for number in range(10):  # over the child's start and its first seconds of reading
                session.append_message(text_message(f"m{number}", "written while the import reads"))
                time.sleep(0.5)
            assert child.poll() is None, "the import ended before the writes were tried beside it"
    finally:
        code, err = finished(child)
    assert code == 1 and "reading it took longer than 8 s" in err


def test_ctrl_c_stops_an_endless_source(db_path, tmp_path):
    Store(db_path).close()
    source = endless_sdk_source(tmp_path / "agent.db", FOREVER)
    child = memorylab_cli(db_path, "import", str(source), "--dry-run")
    time.sleep(3)  # started, and deep in the query
    assert child.poll() is None
    child.send_signal(signal.SIGINT)
    code, err = finished(child, within=15)
    assert code == -signal.SIGINT or "KeyboardInterrupt" in err, (code, err)
