"""The Experiments page draws a decay run's retention curve under the leaderboard (AppTest)."""
import pytest

from memorylab import Store
from memorylab.experiments import Experiments
from tests.lab.test_experiments_page import offline_sample, run_page


@pytest.fixture
def decay_db(sample_lab_db):
    spec = offline_sample("migration", "coding") | {"name": "decay"}
    spec["arms"] = [
        {"name": "extractive-decay", "strategy": "extractive", "protect_head": 2, "tail_token_budget": 600,
         "rounds": [1, 2, 3, 4]},
        {"name": "mask-decay", "strategy": "mask", "rounds": [1, 2, 3, 4], "compact_at": 3000},
    ]
    with Store(sample_lab_db) as store:
        Experiments(store).run(spec)
    return sample_lab_db


def test_a_decay_trial_shows_its_retention_curve_per_arm(decay_db):
    app = run_page(exp_choice="decay", exp_tab="Results")
    assert "Decay over repeated compactions" in [s.value for s in app.subheader]
    (curve,) = [frame.value for frame in app.dataframe if "round" in frame.value.columns]
    assert list(curve["round"]) == [1, 2, 3, 4, 1, 2, 3, 4]
    assert set(curve["arm"]) == {"extractive-decay", "mask-decay"}
    assert len(app.get("plotly_chart")) == 2  # the Pareto chart and the decay chart


def test_a_trial_without_a_decay_arm_draws_no_decay_chart(sample_lab_db):
    with Store(sample_lab_db) as store:
        Experiments(store).run(offline_sample("support"))
    app = run_page(exp_choice="sample", exp_tab="Results")
    assert "Decay over repeated compactions" not in [s.value for s in app.subheader]
    assert len(app.get("plotly_chart")) == 1
