"""A source on a read-only mount: an Agents SDK database in WAL mode (as the SDK leaves it) is detected
and imported, read as it lies on disk, as the store reads its own file on such a mount."""
import asyncio
import os
import shutil
import sqlite3
import subprocess
from contextlib import contextmanager

import pytest
from agents import SQLiteSession

from memorylab import ImportFormatError, Session
from memorylab.importers import FORMATS, detect_format, import_source


def agents_sdk(path):
    session = SQLiteSession("trip", str(path))
    asyncio.run(session.add_items([{"role": "user", "content": "Weather in Paris?"},
                                   {"role": "assistant", "content": "Sunny."}]))
    session.close()


@contextmanager
def read_only(folder):
    """``folder`` as a read-only mount shows it (a bind mount where this user may mount, as root may;
    else its write bits taken away, which binds every other user)."""
    mounted = folder.with_name(folder.name + "-ro")
    mounted.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["mount", "--bind", str(folder), str(mounted)], check=True)
        try:
            subprocess.run(["mount", "-o", "remount,ro,bind", str(mounted)], check=True)
            yield mounted
        finally:
            subprocess.run(["umount", str(mounted)], check=True)
    else:
        os.rmdir(mounted)
        folder.chmod(0o555)
        try:
            yield folder
        finally:
            folder.chmod(0o755)


def test_an_agents_sdk_database_in_wal_mode_on_a_read_only_mount_imports(store, tmp_path):
    folder = tmp_path / "sdk"
    folder.mkdir()
    agents_sdk(folder / "agent.db")
    assert (folder / "agent.db").read_bytes()[18:20] == b"\x02\x02"  # WAL mode, as the SDK sets it
    with read_only(folder) as mounted:
        with pytest.raises(OSError):
            (mounted / "probe").touch()
        source = mounted / "agent.db"
        assert detect_format(source) is FORMATS["openai-agents"]
        report = import_source(store, source)
        assert (report.format, report.messages_added) == ("openai-agents", 2)
        assert sorted(os.listdir(mounted)) == ["agent.db"]
    history = Session.open(store, "trip", agent_id="openai-agents").get_history()
    assert [m["role"] for m in history] == ["user", "assistant"]


def test_one_whose_write_ahead_log_holds_changes_is_refused_saying_what_to_do(store, tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    agents_sdk(live / "agent.db")
    writer = sqlite3.connect(live / "agent.db")
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("INSERT INTO agent_messages (session_id, message_data) VALUES ('trip', ?)",
                   ('{"role": "user", "content": "And Rome?"}',))
    writer.commit()
    folder = tmp_path / "sdk"
    folder.mkdir()
    for name in ("agent.db", "agent.db-wal"):  # a copy taken while the SDK ran, without its index
        shutil.copyfile(live / name, folder / name)
    writer.close()
    assert (folder / "agent.db-wal").stat().st_size
    with read_only(folder) as mounted:
        with pytest.raises(ImportFormatError, match=r"agent\.db: cannot read it here .*agent\.db-wal\) holds "
                                                    "changes .* copy the file and its -wal to a writable folder"):
            import_source(store, mounted / "agent.db")
    assert import_source(store, folder / "agent.db").messages_added == 3  # as the message says
