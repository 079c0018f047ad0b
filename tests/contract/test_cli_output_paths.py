"""An output file named on the command line is never the open store: ``export -o`` and ``eval --json``
refuse the store's own file, its -wal and -shm, by any spelling (relative, through a symlink, a hard
link), before anything is read or run, and the store is left byte for byte as it was (compared once
the command has closed it, when SQLite has moved its WAL back into the file)."""
import os

import pytest
import yaml

from memorylab import Session, Store
from memorylab.cli import main
from memorylab.samples import SAMPLE_DIR
from tests.helpers import text_message

SAMPLE_SPEC = SAMPLE_DIR / "experiments" / "sample.yaml"


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """lab.db in WAL mode (its -wal and -shm beside it while it is open) holding session s1; the
    working directory is its folder, so a bare name is relative to it."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "lab.db"
    with Store(path) as store:
        Session.create(store, "s1").append_message(text_message("m1", "kept"))
    return path


def spellings(lab):
    """Names of lab.db and its companions: as given, relative, through a symlink, a hard link."""
    folder = lab.parent
    (folder / "sub").mkdir()
    (folder / "link.db").symlink_to(lab)
    os.link(lab, folder / "hard.db")
    return [str(lab), "lab.db", "./sub/../lab.db", str(folder / "link.db"), "hard.db", "lab.db-wal", "lab.db-shm",
            str(folder / "sub" / ".." / "lab.db-wal")]


def test_export_refuses_to_write_over_the_store(lab, capsys):
    names = spellings(lab)
    before = lab.read_bytes()
    for name in names:
        assert main(["--db", "lab.db", "export", "s1", "-o", name]) == 1, name
        error = capsys.readouterr().err
        assert error.startswith(f"memorylab: error: -o {name} is ") and "the store" in error, error
        assert lab.read_bytes() == before, name
    with Store(lab) as store:
        assert [m["id"] for m in Session.open(store, "s1").get_history()] == ["m1"]


def test_export_still_writes_beside_the_store(lab, capsys):
    assert main(["--db", str(lab), "export", "s1", "-o", "s1.json"]) == 0
    assert '"m1"' in (lab.parent / "s1.json").read_text(encoding="utf-8")


def test_eval_refuses_a_json_output_that_is_the_store_before_running_anything(lab, capsys):
    spec = yaml.safe_load(SAMPLE_SPEC.read_text(encoding="utf-8"))
    spec["arms"] = [arm for arm in spec["arms"] if arm["strategy"] == "none"]
    (lab.parent / "spec.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    names = spellings(lab)
    before = lab.read_bytes()
    for name in names:
        # eval: 2 is any error but a low score
        assert main(["--db", str(lab), "eval", "spec.yaml", "--with-samples", "--json", name]) == 2, name
        error = capsys.readouterr().err
        assert error.startswith(f"memorylab: error: --json {name} is ") and "the store" in error, error
        assert lab.read_bytes() == before, name


def test_copy_refuses_a_target_that_is_the_source_and_leaves_it_whole(lab, capsys):
    names = spellings(lab)
    before = lab.read_bytes()
    for name in names:
        assert main(["copy", "--from", "lab.db", "--to", name]) == 1, name
        error = capsys.readouterr().err
        assert f"{name} is the source store lab.db" in error and "nothing was done" in error, error
        assert lab.read_bytes() == before, name
    with Store(lab) as store:
        assert [m["id"] for m in Session.open(store, "s1").get_history()] == ["m1"]
