"""The Experiments page shows each arm's mean with its 95% interval and its verdict against the best
arm, and two trials compared arm by arm with the paired change, its interval and a verdict; the
numbers are the engine's."""
import pytest

from memorylab import Store
from memorylab.experiments import Experiments, compare_trials, interval_text, score_text
from tests.lab.test_experiments_page import offline_sample, rerun, run_page


def with_window(max_length):
    """The offline sample (no summarize arm) with its window arm at ``max_length`` tokens."""
    spec = offline_sample()
    next(arm for arm in spec["arms"] if arm["strategy"] == "window")["max_length"] = max_length
    return spec


@pytest.fixture
def two_trials(sample_lab_db):
    """The offline sample run twice, the second time with a window of 2,000 tokens."""
    with Store(sample_lab_db) as store:
        experiments = Experiments(store)
        first, second = experiments.run(with_window(8000)), experiments.run(with_window(2000))
    return first, second


def table_with(app, column):
    (table,) = [t.value for t in app.dataframe if column in t.value.columns]
    return table


def test_the_leaderboard_shows_each_mean_with_its_interval_and_its_verdict_against_the_best(two_trials):
    first, _ = two_trials
    app = run_page(**{"exp_trial:sample": 1})
    board = table_with(app, "verdict").set_index("arm")
    summaries = {s["arm"]: s for s in first.arm_summaries()}
    assert set(board.index) == set(summaries)
    for arm, summary in summaries.items():
        assert board.loc[arm, "interval"] == interval_text(summary) == (
            f"{summary['score_low']:.2f}–{summary['score_high']:.2f}")
        assert board.loc[arm, "vs_best"] == (summary["vs_best"] or "(the best)")
    assert board.loc["full-history", "interval"] == "1.00–1.00" and board.loc["full-history", "vs_best"] == "(the best)"
    metrics = {m.label: m for m in app.metric}
    best = summaries[metrics["Best arm that saves tokens"].value]
    assert f"{metrics['Its score'].value} ({metrics['Its score'].proto.delta.split(' · ')[0][4:]})" == \
        score_text(best) == f"{best['score']:.2f} ({best['score_low']:.2f}–{best['score_high']:.2f})"
    assert "Download leaderboard CSV" in [d.label for d in app.download_button]


def test_two_trials_compare_arm_by_arm_with_the_paired_change_and_a_verdict(two_trials):
    first, second = two_trials
    app = run_page()
    app.selectbox(key="exp_versus:sample:2").select(1)
    rerun(app)
    arms = table_with(app, "arm_verdict").set_index("arm")
    assert "score_change" not in arms.columns and len(arms) == 4
    engine = compare_trials(first, second).drop_duplicates("arm").set_index("arm")  # trial 2 minus trial 1
    assert arms.sort_index().equals(engine[arms.columns].sort_index())
    window = arms.loc["window-8k"]
    assert window["arm_cases"] == 3 and window["arm_change"] < 0
    assert window["arm_change_low"] <= window["arm_change"] <= window["arm_change_high"]
    for unchanged in ("full-history", "extractive", "truncate"):
        assert arms.loc[unchanged, "arm_change"] == 0 and arms.loc[unchanged, "arm_verdict"] == "no clear difference"
    (caption,) = [c.value for c in app.caption if "arms better" in c.value]
    verdicts = list(arms["arm_verdict"])
    assert caption.startswith(f"Arm by arm over the cases both trials ran: {verdicts.count('better')} arms better, "
                              f"{verdicts.count('worse')} worse, {verdicts.count('no clear difference')} no clear")
    assert len(table_with(app, "score_change")) == 4 * 3  # the case-by-case table stays
