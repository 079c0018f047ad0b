"""Another program's SQLite database is never changed by opening it as a store: ``memorylab check
OTHER.db`` or ``--db OTHER.db stats`` on an Agents SDK or llm database reads it read-only and refuses
it, pointing at ``memorylab import``, and the file stays byte for byte as it was (no WAL switch, no
memorylab tables). A path with nothing there, or an empty file, still becomes a new store.

The databases are written by the real peer libraries, as the importer tests write them. These are
tests of SQLite files, so they run once."""
import hashlib

import pytest

from memorylab import Session, Store
from memorylab.cli import main
from memorylab.errors import NotAStoreError
from tests.contract.test_import_llm_logs import llm_user_dir, logs  # noqa: F401 (fixtures)
from tests.contract.test_import_openai_agents import sdk_session
from tests.helpers import text_message


@pytest.fixture(params=["openai-agents", "llm"])
def foreign(request, tmp_path):
    """An Agents SDK ``SQLiteSession`` database (in WAL mode, as the SDK leaves it) or an llm logs database."""
    if request.param == "llm":
        return request.getfixturevalue("logs")[0]
    path = tmp_path / "agent.db"
    sdk_session(path, "trip", "Weather in Paris?")
    return path


def fingerprint(path):
    """The file's bytes, and those of a WAL beside it (SQLite may leave an empty one and a -shm after a read)."""
    wal = path.with_name(path.name + "-wal")
    return hashlib.sha256(path.read_bytes()).hexdigest(), wal.read_bytes() if wal.exists() else b""


@pytest.mark.parametrize("argv", [["check", "{db}"], ["--db", "{db}", "stats"], ["--db", "{db}", "check", "--repair"],
                                  ["--db", "{db}", "export", "trip"], ["--db", "{db}", "demo"]])
def test_a_command_refuses_another_programs_database_and_leaves_it_as_it_was(foreign, argv, capsys):
    before = fingerprint(foreign)
    assert main([arg.format(db=foreign) for arg in argv]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"memorylab: error: {foreign} is not a memorylab store") and error.count("\n") == 1
    assert f"memorylab --db LAB.db import {foreign}" in error and "was not changed" in error
    assert fingerprint(foreign) == before


@pytest.mark.parametrize("read_only", [False, True])
def test_opening_it_as_a_store_is_refused_without_writing(foreign, read_only):
    before = fingerprint(foreign)
    with pytest.raises(NotAStoreError, match="not a memorylab store"):
        Store(foreign, read_only=read_only)
    assert fingerprint(foreign) == before


@pytest.mark.parametrize("prepare", ["absent", "empty file"])
def test_a_new_path_or_an_empty_file_becomes_a_store(tmp_path, prepare):
    path = tmp_path / "new" / "lab.db"
    if prepare == "empty file":
        path.parent.mkdir()
        path.touch()
    with Store(path) as store:
        Session.create(store, "s1").append_message(text_message("m1", "hello"))
    with Store(path) as store:
        assert [m["id"] for m in Session.open(store, "s1").get_history()] == ["m1"]
