"""The lab as a user sees it: Streamlit's AppTest, then the real server in headless Chromium."""
import os
import subprocess
import sys

from streamlit.testing.v1 import AppTest

from memorylab import Store
from memorylab.samples import sample_files, sample_memory_keys
from tests.helpers import ROOT


def run_app():
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    app.run()
    assert not app.exception, app.exception
    return app


def test_first_start_creates_the_lab_database_from_sample_data(lab_db):
    app = run_app()
    assert lab_db.exists()
    table = app.dataframe[0].value
    with Store(lab_db) as store:
        assert len(table) == len(store.sessions.list()) == len(sample_files()) + len(sample_memory_keys())
    with Store(lab_db) as store:
        sessions = {s["session_id"]: s for s in store.sessions.list()}
    assert set(table["session"]) == set(sessions)
    for _, row in table.iterrows():
        assert row["messages"] == sessions[row["session"]]["message_count"]
        assert row["branches"] == sessions[row["session"]]["branch_count"]
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Sessions"] == str(len(table))


def test_app_start_does_not_import_litellm(lab_db):
    code = (
        "import sys; from streamlit.testing.v1 import AppTest;"
        f"AppTest.from_file({str(ROOT / 'app.py')!r}, default_timeout=60).run();"
        "print('litellm' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "MEMORYLAB_DB": str(lab_db)})
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_the_lab_opens_the_database_the_command_line_wrote_by_default(tmp_path, monkeypatch):
    from memorylab.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMORYLAB_DB", raising=False)
    assert main(["import", str(sample_files()[0])]) == 0  # no --db: the default database
    app = run_app()
    assert any(caption.value == "Database `lab.db`" for caption in app.sidebar.caption)
    assert list(app.dataframe[0].value["session"]) == ["trip-planning-branches"]  # the import, no samples added
