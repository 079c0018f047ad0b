"""``memorylab eval`` prints each arm's mean with its 95% interval and verdict against the best arm,
writes them to the JSON file, and its --min-score verdicts, still judged on the mean, show the
interval and say when the threshold lies inside it."""
import json
import re

import pytest
import yaml

from memorylab.cli import main
from memorylab.samples import SAMPLE_DIR

SAMPLE_SPEC = SAMPLE_DIR / "experiments" / "sample.yaml"
INTERVAL = r"(\d\.\d\d)–(\d\.\d\d)"


@pytest.fixture
def spec_path(tmp_path):
    """The sample spec without its model arm (the embedded model's runs are the slow lane's)."""
    spec = yaml.safe_load(SAMPLE_SPEC.read_text(encoding="utf-8"))
    spec["arms"] = [arm for arm in spec["arms"] if arm["strategy"] in ("none", "extractive", "window", "truncate")]
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return str(path)


def board_rows(out):
    """The leaderboard's rows by arm, each a list of its cells."""
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ")]
    header, *body = rows
    return header, {row[0]: dict(zip(header, row)) for row in body}


def test_the_leaderboard_prints_each_mean_with_its_interval_and_the_json_holds_them(tmp_path, spec_path, capsys):
    out = tmp_path / "results.json"
    assert main(["--db", str(tmp_path / "lab.db"), "eval", spec_path, "--with-samples", "--json", str(out)]) == 0
    header, rows = board_rows(capsys.readouterr().out)
    assert header[2:5] == ["score", "95% interval", "against the best"]
    full = rows["full-history"]
    assert (full["95% interval"], full["against the best"]) == ("1.00–1.00", "(the best)")
    arms = {arm["name"]: arm for arm in json.loads(out.read_text(encoding="utf-8"))["arms"]}
    for name, row in rows.items():
        low, high = re.fullmatch(INTERVAL, row["95% interval"]).groups()
        assert (low, high) == (f"{arms[name]['score_low']:.2f}", f"{arms[name]['score_high']:.2f}")
        assert arms[name]["score_low"] <= arms[name]["score"] <= arms[name]["score_high"]
        assert row["against the best"] in ("(the best)", "worse", "no clear difference")
    assert arms["full-history"]["vs_best"] is None


def test_a_failing_arm_is_judged_on_its_mean_and_its_line_shows_the_interval(tmp_path, spec_path, capsys):
    db = str(tmp_path / "lab.db")
    assert main(["--db", db, "eval", spec_path, "--with-samples", "--min-score", "0.99", "--json",
                 str(tmp_path / "r.json")]) == 1
    failures = [line for line in capsys.readouterr().out.splitlines() if line.startswith("FAIL")]
    arms = {arm["name"]: arm for arm in json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["arms"]}
    assert {line.split(":")[0][5:] for line in failures} == {name for name, arm in arms.items() if arm["score"] < 0.99}
    for line in failures:
        name = line.split(":")[0][5:]
        arm = arms[name]
        assert line.startswith(f"FAIL {name}: score {arm['score']:.3f} (95% interval "
                               f"{arm['score_low']:.2f}–{arm['score_high']:.2f}) is under its threshold 0.990")
        close = line.endswith("(the threshold is inside its interval: more cases would tell)")
        assert close == (arm["score_high"] >= 0.99)
