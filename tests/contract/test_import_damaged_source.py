"""A damaged SQLite source is the source's fault: the import is refused naming that file, the store
is left as it was, and nothing tells the user to restore the store (which would lose their work).

The sources are written by the real peer libraries (the Agents SDK's ``SQLiteSession``, llm's
logging), then a page of the table a reader streams its messages from is overwritten, as a bad
disk or a copy cut short leaves it."""
import sqlite3

import pytest

from memorylab import ImportFormatError, Store
from memorylab.check import check_database
from memorylab.cli import main
from memorylab.importers import detect_format, import_source
from tests.contract.test_import_llm_logs import llm_user_dir, logs  # noqa: F401 (fixtures)
from tests.contract.test_import_openai_agents import sdk_session
from tests.helpers import count_rows, stored_bytes


def damage_table(path, table):
    """Overwrite the first page of ``table`` (its b-tree's root) with bytes SQLite cannot read."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    conn.close()
    with open(path, "r+b") as file:
        file.seek((root - 1) * page_size)
        file.write(b"\xff" * page_size)


@pytest.fixture(params=["openai-agents: agent_messages", "llm: turns", "llm: parts"])
def damaged_source(request, tmp_path):
    """A source detected as its format whose messages cannot all be read."""
    format_name, table = request.param.split(": ")
    if format_name == "openai-agents":
        path = tmp_path / "agent.db"
        sdk_session(path, "trip", "Weather in Paris?", "And in Rome?")
    else:
        path = request.getfixturevalue("logs")[0]
    damage_table(path, table)
    assert detect_format(path).name == format_name
    return path


def test_a_damaged_source_is_an_import_error_naming_it_and_the_store_is_untouched(store, damaged_source):
    before = stored_bytes(store)
    with pytest.raises(ImportFormatError) as refused:
        import_source(store, damaged_source)
    message = str(refused.value)
    assert message.startswith(f"{damaged_source}: ") and "nothing was imported" in message
    assert "malformed" in message and "restore" not in message and store.path not in message
    assert (count_rows(store, "sessions"), count_rows(store, "messages")) == (0, 0)
    assert stored_bytes(store) == before
    assert check_database(store).ok


def test_the_command_line_says_the_source_is_damaged_not_the_store(store_target, damaged_source, capsys):
    assert main(["--db", str(store_target), "import", str(damaged_source)]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"memorylab: error: {damaged_source}: ") and "restore" not in error
    with Store(store_target) as store:
        assert count_rows(store, "messages") == 0
