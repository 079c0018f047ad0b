"""One default database for the command line and the lab, and no empty database left behind by a
command that wrote nothing."""
import json

import pytest

from memorylab.cli import main
from memorylab.samples import SAMPLE_DIR, sample_files
from memorylab.store import default_database


@pytest.fixture
def in_empty_folder(tmp_path, monkeypatch):
    """The working folder is an empty one and ``$MEMORYLAB_DB`` is unset."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMORYLAB_DB", raising=False)
    return tmp_path


def test_the_default_is_lab_db_unless_memorylab_db_names_another(in_empty_folder, monkeypatch):
    assert default_database() == "lab.db"
    monkeypatch.setenv("MEMORYLAB_DB", "postgresql://me@db/agents")
    assert default_database() == "postgresql://me@db/agents"


def test_the_cli_writes_lab_db_by_default_and_reads_memorylab_db(in_empty_folder, monkeypatch, capsys):
    assert main(["demo"]) == 0
    assert [path.name for path in in_empty_folder.iterdir()] == ["lab.db"]
    monkeypatch.setenv("MEMORYLAB_DB", str(in_empty_folder / "lab.db"))
    monkeypatch.chdir(in_empty_folder.parent)
    capsys.readouterr()
    assert main(["stats", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) >= len(sample_files())


@pytest.mark.parametrize("command", [
    ["stats"], ["export", "support-order-4471"], ["audit"], ["check"], ["check", "lab.db"],
    ["eval", str(SAMPLE_DIR / "experiments" / "sample.yaml")],
])
def test_a_read_only_command_on_a_missing_database_says_so_and_creates_nothing(in_empty_folder, command, capsys):
    assert main(command) != 0
    error = capsys.readouterr().err
    assert "no database at 'lab.db': the file does not exist, and nothing was created" in error, error
    assert error.count("\n") == 1
    assert list(in_empty_folder.iterdir()) == []


def test_a_dry_run_import_into_a_missing_database_reports_and_creates_nothing(in_empty_folder, capsys):
    assert main(["import", str(sample_files()[0]), "--dry-run"]) == 0
    assert "new" in capsys.readouterr().out
    assert list(in_empty_folder.iterdir()) == []


def test_a_spec_that_cannot_run_leaves_no_database_even_with_samples_asked_for(in_empty_folder, tmp_path):
    spec = tmp_path.parent / f"{tmp_path.name}-bad.yaml"
    spec.write_text("name: x\narms: []\n", encoding="utf-8")
    assert main(["eval", str(spec), "--with-samples"]) == 2
    assert list(in_empty_folder.iterdir()) == []
