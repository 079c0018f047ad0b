import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from memorylab import Session, Store


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "lab.db"


@pytest.fixture
def store(db_path):
    with Store(db_path) as store:
        yield store


@pytest.fixture
def session(store):
    return Session.create(store, "s1")


def text_message(message_id, text, role="user"):
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}]}


def ids(messages):
    return [m["id"] for m in messages]


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


@pytest.fixture
def lab_server(lab_db):
    """`streamlit run app.py` on a free port; yields its URL."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
         "--server.port", str(port), "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "MEMORYLAB_DB": str(lab_db)},
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
