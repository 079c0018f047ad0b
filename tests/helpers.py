"""What many test files share: message builders, row readers, the lab server and the browser pages.

Imported as ``from tests.helpers import ...``; fixtures live in ``tests/conftest.py``.
"""
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest

from memorylab import Session, SqliteSearchProvider
from memorylab.store import is_postgres_url

ROOT = Path(__file__).resolve().parent.parent
BROWSER_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                 "--disable-dev-shm-usage"]
FULL_RUN = {"examples_scale": 1.0}
"""Set by conftest: the fast lane (``-m "not slow"``) runs a tenth of the property-based examples."""


def examples(count):
    """How many Hypothesis examples a property test runs: ``count`` in the full run, fewer in the fast lane."""
    return max(10, int(count * FULL_RUN["examples_scale"]))


def text_message(message_id, text, role="user"):
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}]}


def confirm_in_dialog(app, key):
    """Confirm the dialog the button of ``key`` opened (ticking its acknowledgement when it asks for one)."""
    for box in app.checkbox:
        if box.key == f"{key}:acknowledged":
            box.check().run()
    app.button(key=f"{key}:confirm").click().run()
    return app


def ids(messages):
    return [m["id"] for m in messages]


def count_rows(store, table):
    """Rows of a table, read through the store's own connection on either backend."""
    return store.fetch_one(f"SELECT COUNT(*) FROM {table}")[0]


def stored_bytes(store):
    """Everything a store holds: its SQLite file with WAL and journal, or every PostgreSQL row as text."""
    if is_postgres_url(store.path):
        tables = store.fetch_all("SELECT table_name FROM information_schema.tables "
                                 "WHERE table_schema = current_schema()")
        return "\n".join(
            row[0] or "" for (table,) in tables
            for row in store.fetch_all(f"SELECT CAST(t AS text) FROM {table} AS t")
        ).encode()
    path = Path(store.path)
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def database_rows(target):
    """Every row of every table (FTS shadow tables included), to compare a database before and after:
    read straight from the SQLite file, or from the PostgreSQL schema the URL names."""
    if is_postgres_url(str(target)):
        import psycopg

        conn = psycopg.connect(str(target))
        tables_sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    else:
        conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
        tables_sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'"
    try:
        tables = [row[0] for row in conn.execute(tables_sql).fetchall()]
        return {table: sorted(conn.execute(f'SELECT * FROM "{table}"').fetchall(), key=repr) for table in tables}
    finally:
        conn.close()


def write_branched_sessions(store):
    """Session s1: m1 - m2 - m3 and a branch m2 - m4 - m5 (newest), an overlay over m1..m2, a block;
    session "other" with one message o1; one search entry."""
    s1 = Session.create(store, "s1")
    for message_id, parent in (("m1", None), ("m2", "m1"), ("m3", "m2"), ("m4", "m2"), ("m5", "m4")):
        s1.append_message(text_message(message_id, f"words of {message_id}"), parent_id=parent)
    s1.add_compaction("m1 and m2 in short", "m1", "m2")
    s1.with_context("notes").replace_context_block("notes", "a block")
    Session.create(store, "other").append_message(text_message("o1", "another session"))
    SqliteSearchProvider(store).set("refunds", "refunds take five days")


class RecordingSummarizer:
    """A summarizer for tests: records every prompt and answers "summary #N"."""

    def __init__(self):
        self.prompts = []

    def __call__(self, prompt):
        self.prompts.append(prompt)
        return f"summary #{len(self.prompts)}"


class TableCells(HTMLParser):
    """Every table row of some HTML as a list of cell texts (entities decoded, as a browser shows them)."""

    def __init__(self, markup):
        super().__init__()
        self.rows, self._cell = [], None
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.rows[-1].append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


# url path -> text that must show once the page has rendered
PAGES = {
    "": "Tokens (estimate)",
    "chat": "What the model sees",
    "tree": "Active path",
    "context_blocks": "Budgets",
    "context_window": "Estimated request",
    "compaction_lab": "Summary prompt template",
    "audit": "What each compaction forgot",
    "experiments": "No experiment in this store yet",
    "search": "Type words to search",
    "memory": "Cross-agent admin",
    "long_term": "Retrieval run",
}


def run_app_page(path, **state):
    """The lab script ``path`` (``app_pages/tree.py``, or ``app.py``) run once in AppTest with
    ``state`` put in its session state first; fails on any exception the run raised."""
    from streamlit.testing.v1 import AppTest  # here, not at the top: most tests never start the lab

    app = AppTest.from_file(str(ROOT / path), default_timeout=60)
    for key, value in state.items():
        app.session_state[key] = value
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def browser_page(browser):
    """A fresh tab of the ``browser`` fixture's Chromium, closed after the test (``yield from`` it)."""
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    yield page
    page.close()


def _interrupt_as_ctrl_c():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def memorylab_process(*argv, env=None):
    """``python -m memorylab ARGV`` running, its output piped as text, which a SIGINT interrupts as
    Ctrl-C in a terminal would: a test run started in the background by a script (``scripts/test &``)
    ignores SIGINT, and a child inherits that, so it is set back to the default first."""
    return subprocess.Popen([sys.executable, "-m", "memorylab", *argv], cwd=ROOT, env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_interrupt_as_ctrl_c)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_lab(target):
    """`streamlit run app.py` on a free port with ``MEMORYLAB_DB=target``; yields its URL."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
         "--server.port", str(port), "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "MEMORYLAB_DB": str(target)},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120  # a loaded 2-core CI machine has taken over 60 s to start it
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
