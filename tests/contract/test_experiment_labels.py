"""People's labels on probe verdicts, on both backends: stored with the trial and exported, shown again
on a re-run that leaves the same output and stale on one that leaves another, each scorer's
agreement with them (count, Cohen's kappa, false passes and fails), and a finished trial re-graded by
another judge model without summarizing or answering anew."""
import json

import pytest

from memorylab import InvalidInputError, NotFoundError
from memorylab.cli import main
from memorylab.experiments import Experiments
from tests.contract.test_experiments import load_sample_sessions, sample_spec


@pytest.fixture
def labelled(store):
    """The window and truncate arms on the support case, run once."""
    load_sample_sessions(store)
    spec = sample_spec(strategies=("window", "truncate"))
    spec["cases"] = [spec["cases"][1]]
    Experiments(store).run(spec)
    return store, spec


def window_scores(experiments, trial=None):
    run = experiments.results("sample", trial).run("window-8k", "support")
    return {score["probe"]: score for score in run["scores"]}


def test_labels_are_stored_with_who_and_when_and_the_matcher_is_calibrated_against_them(labelled):
    store, _ = labelled
    experiments = Experiments(store)
    scores = window_scores(experiments)
    probes = list(scores)[:3]
    # the people agree with the matcher on two probes and say the third verdict is wrong
    truths = {probe: scores[probe]["fact_score"] >= 0.5 for probe in probes}
    truths[probes[2]] = not truths[probes[2]]
    for probe, truth in truths.items():
        experiments.label("sample", 1, "support", "window-8k", probe, truth, by="ana")

    results = experiments.results("sample")
    label = results.labels[("support", "window-8k", probes[0])]
    assert label["labelled_by"] == "ana" and label["labelled_at"] and label["trial"] == 1 and not label["stale"]
    matcher = experiments.calibration("sample").agreement("matcher")
    assert (matcher.labelled, matcher.agreed) == (3, 2)
    wrong = [("support", "window-8k", probes[2])]
    assert list(matcher.false_pass if truths[probes[2]] is False else matcher.false_fail) == wrong
    trust = results.leaderboard().set_index("arm")["trust"]
    assert trust["window-8k"].startswith("matcher agrees with 2 of 3 labels")
    assert trust["truncate"] == "matcher: no labels yet"

    exported = json.loads(results.to_json())
    assert {(row["probe_id"], row["correct"]) for row in exported["labels"]} == set(truths.items())
    assert exported["calibration"]["scorers"][0] | {"false_pass": None, "false_fail": None} == {
        "scorer": "matcher", "kind": "all", "labelled": 3, "agreed": 2, "agreement": 2 / 3,
        "kappa": matcher.kappa, "false_pass": None, "false_fail": None}
    window = next(arm for arm in exported["arms"] if arm["name"] == "window-8k")
    assert window["trust"].startswith("matcher agrees with 2 of 3")

    experiments.label("sample", 1, "support", "window-8k", probes[2], not truths[probes[2]], grade=1, by="bo")
    again = experiments.calibration("sample").agreement("matcher")
    assert (again.labelled, again.agreed) == (3, 3), "a second label on the same output replaces the first"
    assert experiments.results("sample").labels[("support", "window-8k", probes[2])]["grade"] == 1.0


def test_a_label_shows_again_on_a_rerun_with_the_same_output_and_is_stale_on_another(labelled):
    store, spec = labelled
    experiments = Experiments(store)
    probe = next(iter(window_scores(experiments)))
    experiments.label("sample", 1, "support", "window-8k", probe, True)
    experiments.run(spec)
    assert not experiments.results("sample", 2).labels[("support", "window-8k", probe)]["stale"]
    assert experiments.calibration("sample", 2).agreement("matcher").labelled == 1

    window = next(arm for arm in spec["arms"] if arm["strategy"] == "window")
    window["max_length"] = 400  # the window now keeps another context
    experiments.run(spec)
    shown = experiments.results("sample", 3).labels[("support", "window-8k", probe)]
    assert shown["stale"] and shown["trial"] == 1
    assert experiments.calibration("sample", 3).agreement("matcher").labelled == 0
    assert experiments.results("sample", 1).labels[("support", "window-8k", probe)]["stale"] is False


def test_a_label_names_what_it_judges_or_is_refused(labelled):
    store, _ = labelled
    experiments = Experiments(store)
    probe = next(iter(window_scores(experiments)))
    with pytest.raises(InvalidInputError, match="grade must be a number from 0 to 1"):
        experiments.label("sample", 1, "support", "window-8k", probe, True, grade=1.5)
    with pytest.raises(InvalidInputError, match="correct must be True or False"):
        experiments.label("sample", 1, "support", "window-8k", probe, "yes")
    with pytest.raises(NotFoundError, match="no probe 'nope'"):
        experiments.label("sample", 1, "support", "window-8k", "nope", True)
    with pytest.raises(NotFoundError, match="no finished run of arm 'none'"):
        experiments.label("sample", 1, "support", "none", probe, True)
    with pytest.raises(NotFoundError, match="no trial 9"):
        experiments.label("sample", 9, "support", "window-8k", probe, True)
    assert experiments.results("sample").labels == {}
    assert experiments.delete("sample")


def test_another_judge_re_grades_the_stored_answers_and_each_judge_is_calibrated(store, litellm):
    load_sample_sessions(store)
    spec = sample_spec(strategies=("window",))
    spec["cases"] = [spec["cases"][1] | {"probes": spec["cases"][1]["probes"][:3]}]
    spec["grader"] = {"answer_model": "openai/gpt-4o-mini", "judge_model": "openai/gpt-4o-mini",
                      "completion": {"mock_response": "SCORE: 1 - it states them."}}
    experiments = Experiments(store)
    before = experiments.run(spec)
    answers = [score["answer"] for score in before.runs[0]["scores"]]

    regrading = experiments.regrade("sample", "openai/gpt-4o", completion={"mock_response": "SCORE: 0 - wrong."})
    assert regrading.mean_change() == -1.0 and len(regrading.rows) == 3
    arm = regrading.arm_changes().set_index("arm").loc["window-8k"]
    assert (arm["probes"], arm["score"], arm["regraded"], arm["moved"]) == (3, 1.0, 0.0, 3)
    after = experiments.results("sample")
    assert [score["answer"] for score in after.runs[0]["scores"]] == answers, "nothing was answered anew"
    assert after.runs[0]["score"] == 1.0, "the trial's own scores stay"

    probes = [score["probe"] for score in after.runs[0]["scores"]]
    for probe, truth in zip(probes, (True, True, False)):
        experiments.label("sample", 1, "support", "window-8k", probe, truth)
    calibration = experiments.calibration("sample")
    assert calibration.scorers == ["matcher", "judge openai/gpt-4o", "judge openai/gpt-4o-mini"]
    mini, other = (calibration.agreement(f"judge openai/{model}") for model in ("gpt-4o-mini", "gpt-4o"))
    assert (mini.agreed, mini.false_pass) == (2, (("support", "window-8k", probes[2]),))
    assert (other.agreed, len(other.false_fail)) == (1, 2)
    assert mini.kappa == 0.0, "a judge that passes every probe agrees no better than chance"
    assert experiments.results("sample").trust("window-8k").startswith("judge openai/gpt-4o-mini agrees with 2 of 3")


def test_a_trial_without_a_grader_cannot_be_re_graded(labelled):
    with pytest.raises(InvalidInputError, match="holds no graded answers"):
        Experiments(labelled[0]).regrade("sample", "openai/gpt-4o", completion={"mock_response": "SCORE: 1"})


def test_eval_json_carries_the_labels_a_rerun_keeps(labelled, tmp_path, store_target, backend):
    store, spec = labelled
    experiments = Experiments(store)
    probe = next(iter(window_scores(experiments)))
    experiments.label("sample", 1, "support", "window-8k", probe, False, by="ana")
    spec_path, out = tmp_path / "spec.json", tmp_path / "out.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    assert main(["--db", str(store_target), "eval", str(spec_path), "--json", str(out)]) == 0
    exported = json.loads(out.read_text(encoding="utf-8"))
    assert exported["trial"] == 2
    assert [(row["probe_id"], row["correct"], row["labelled_by"], row["stale"]) for row in exported["labels"]] == [
        (probe, False, "ana", False)]
    assert exported["calibration"]["labelled"] == 1
