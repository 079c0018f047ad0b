import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

import pgserver
from memorylab import Session, Store
from memorylab.store import is_postgres_url

BACKENDS = ("sqlite", "postgres")


def pytest_generate_tests(metafunc):
    """Every test that uses a store runs once per backend: the engine's contract holds on both.
    (Tests about SQLite itself, its file and WAL, open ``Store(db_path)`` and run once.)"""
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS)


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server's URL: $MEMORYLAB_PG_URL (.ci/run starts one), else one started here."""
    url = os.environ.get("MEMORYLAB_PG_URL")
    if url:
        yield url
        return
    if not pgserver.available():
        pytest.fail("PostgreSQL is required for the postgres half of the contract tests: apt-get install "
                    "postgresql, or set MEMORYLAB_PG_URL to a server where this user may create schemas")
    directory = tempfile.mkdtemp(prefix="memorylab-pg-")
    try:
        yield pgserver.start(directory)
    finally:
        pgserver.stop(directory)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server):
    """A URL whose tables live in a schema of their own, dropped after the test."""
    import psycopg

    schema = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield pgserver.in_schema(postgres_server, schema)
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "lab.db"


@pytest.fixture
def store_target(request, backend, db_path):
    """What ``Store()`` opens in this run: a SQLite file, or a fresh PostgreSQL schema."""
    return db_path if backend == "sqlite" else request.getfixturevalue("postgres_url")


@pytest.fixture
def store(store_target):
    with Store(store_target) as store:
        yield store


@pytest.fixture
def session(store):
    return Session.create(store, "s1")


def text_message(message_id, text, role="user"):
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}]}


def ids(messages):
    return [m["id"] for m in messages]


def count_rows(store, table):
    """Rows of a table, read through the store's own connection on either backend."""
    return store._one(f"SELECT COUNT(*) FROM {table}")[0]


def stored_bytes(store):
    """Everything a store holds: its SQLite file with WAL and journal, or every PostgreSQL row as text."""
    if is_postgres_url(store.url if hasattr(store, "url") else store.path):
        tables = store._all("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
        return "\n".join(
            row[0] or "" for (table,) in tables
            for row in store._all(f"SELECT CAST(t AS text) FROM {table} AS t")
        ).encode()
    path = Path(store.path)
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


class RecordingSummarizer:
    """A summarizer for tests: records every prompt and answers "summary #N"."""

    def __init__(self):
        self.prompts = []

    def __call__(self, prompt):
        self.prompts.append(prompt)
        return f"summary #{len(self.prompts)}"


ROOT = Path(__file__).resolve().parent.parent
BROWSER_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                 "--disable-dev-shm-usage"]


@pytest.fixture
def lab_db(tmp_path, monkeypatch):
    """A fresh lab database path, handed to the app through MEMORYLAB_DB."""
    path = tmp_path / "lab.db"
    monkeypatch.setenv("MEMORYLAB_DB", str(path))
    return path


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_lab(target):
    """`streamlit run app.py` on a free port with ``MEMORYLAB_DB=target``; yields its URL."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
         "--server.port", str(port), "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "MEMORYLAB_DB": str(target)},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            break
        except OSError:
            if time.time() > deadline or server.poll() is not None:
                server.kill()
                pytest.fail("streamlit did not start: " + server.stdout.read().decode(errors="replace"))
            time.sleep(0.3)
    yield url
    server.terminate()
    server.wait(timeout=20)


@pytest.fixture
def lab_server(lab_db):
    yield from serve_lab(lab_db)


@pytest.fixture(scope="session")
def browser():
    """Debian's headless Chromium driven by Playwright (no browser download)."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.fail("headless Chromium is required for the browser tests: apt-get install chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=BROWSER_FLAGS)
        yield browser
        browser.close()
