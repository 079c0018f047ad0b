"""``memorylab eval``: the leaderboard on stdout, the JSON file CI reads, and the exit code that fails a
build when an arm scores under its threshold (and only then)."""
import json

import pytest
import yaml

from memorylab import Store
from memorylab.cli import main
from memorylab.samples import SAMPLE_DIR

SAMPLE_SPEC = SAMPLE_DIR / "experiments" / "sample.yaml"


@pytest.fixture
def spec_file(tmp_path):
    """The sample spec without its model arm (the embedded model's runs are the slow lane's)."""
    def write(**changes):
        spec = yaml.safe_load(SAMPLE_SPEC.read_text(encoding="utf-8"))
        spec["arms"] = [arm for arm in spec["arms"] if arm["strategy"] in ("none", "extractive", "window", "truncate")]
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(spec | changes), encoding="utf-8")
        return str(path)
    return write


def test_a_passing_experiment_prints_its_leaderboard_writes_json_and_exits_0(tmp_path, spec_file, capsys):
    out = tmp_path / "results.json"
    assert main(["--db", str(tmp_path / "lab.db"), "eval", spec_file(), "--with-samples", "--json", str(out)]) == 0
    printed = capsys.readouterr()
    assert "sample, trial 1: 4 arms x 3 cases" in printed.out
    assert "| full-history | none | 1.00 |" in printed.out and "FAIL" not in printed.out
    assert "[12/12]" in printed.err
    arms = {arm["name"]: arm for arm in json.loads(out.read_text(encoding="utf-8"))["arms"]}
    assert set(arms) == {"full-history", "extractive", "window-8k", "truncate"}
    assert arms["full-history"]["score"] == 1.0 and arms["window-8k"]["score"] < 1.0
    assert arms["window-8k"]["tokens_after"] < arms["window-8k"]["tokens_before"]


def test_an_arm_under_its_threshold_fails_the_run_with_exit_1(tmp_path, spec_file, capsys):
    db = str(tmp_path / "lab.db")
    assert main(["--db", db, "eval", spec_file(), "--with-samples", "--min-score", "0.99"]) == 1
    failures = [line for line in capsys.readouterr().out.splitlines() if line.startswith("FAIL")]
    assert failures and not any("full-history" in line for line in failures)
    assert any(line.startswith("FAIL window-8k: score 0.") and "under its threshold 0.990" in line for line in failures)

    spec = yaml.safe_load(open(spec_file()))
    next(arm for arm in spec["arms"] if arm["name"] == "extractive")["min_score"] = 0.99
    path = tmp_path / "thresholds.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    assert main(["--db", db, "eval", str(path)]) == 1
    out = capsys.readouterr().out
    assert "trial 2" in out and [line.split(":")[0] for line in out.splitlines() if line.startswith("FAIL")] == [
        "FAIL extractive"]


def test_a_spec_that_cannot_run_exits_2_naming_every_problem(tmp_path, spec_file, capsys):
    path = spec_file(arms=[{"name": "x", "strategy": "summarize", "template": "no placeholder"}], extra=1)
    assert main(["--db", str(tmp_path / "lab.db"), "eval", path]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'extra'" in err and "no {transcript} placeholder" in err
    assert "no session 'long-migration-project'" not in err  # the spec is refused before cases are looked up
    assert main(["--db", str(tmp_path / "lab.db"), "eval", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read the experiment spec" in capsys.readouterr().err
    assert not (tmp_path / "lab.db").exists()  # a spec that cannot run opens no store
    Store(tmp_path / "lab.db").close()
    assert main(["--db", str(tmp_path / "lab.db"), "eval", spec_file()]) == 2
    err = capsys.readouterr().err
    assert "no session 'long-migration-project'" in err and "--with-samples loads the sample conversations" in err


def test_with_lab_url_the_trials_link_is_printed_and_a_wrong_url_runs_nothing(tmp_path, spec_file, capsys):
    db = str(tmp_path / "lab.db")
    assert main(["--db", db, "eval", spec_file(), "--with-samples", "--lab-url", "http://localhost:8501"]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[-1] == \
        "lab: http://localhost:8501/experiments?tenant=default&experiment=sample&tab=Results&trial=1"
    assert main(["--db", db, "eval", spec_file(), "--lab-url", "localhost:8501"]) == 2
    assert "the lab URL must be where the lab is served" in capsys.readouterr().err
    assert main(["--db", db, "eval", spec_file(), "--lab-url", "http://lab:80/"]) == 0
    assert "trial=2" in capsys.readouterr().out  # the refused one ran nothing
