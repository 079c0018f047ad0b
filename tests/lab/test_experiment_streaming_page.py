"""The Experiments page streams a trial (AppTest): with a slow model arm listed first, the arms that
need no model show in the leaderboard and the probe matrix while it runs, with a bar and its time left
and each arm's state; Cancel shows "Cancelling" and the trial keeps what finished. Two arms' contexts
are compared in full; the Pareto chart and the headline read the same numbers as the table."""
import re
import shutil
import time

import pytest
import yaml

from memorylab import Store
from memorylab.experiments import Experiments
from tests.lab.test_experiments_page import SAMPLE_SPEC, click, finish_run, leaderboard, rerun, run_page

FIRST_RESULTS_SECONDS = 5


def slow_model_spec(delay):
    spec = yaml.safe_load(SAMPLE_SPEC.read_text(encoding="utf-8"))
    slow = {"name": "slow-model", "strategy": "summarize", "model": "openai/gpt-4o-mini", "protect_head": 2,
            "tail_token_budget": 1200, "completion": {"mock_response": "## Topic\nA summary.", "mock_delay": delay}}
    offline = ("none", "extractive", "window", "truncate")
    spec["arms"] = [slow, *(arm for arm in spec["arms"] if arm["strategy"] in offline)]
    return spec | {"name": "streaming"}


def upload_and_run(app, spec):
    app.selectbox(key="exp_choice").select("Upload a YAML spec")
    rerun(app)
    app.file_uploader(key="exp_upload").set_value(("s.yaml", yaml.safe_dump(spec).encode(), "application/yaml"))
    rerun(app)
    clicked = time.perf_counter()
    click(app, "Run")
    return clicked


def rerun_until(app, shown, timeout):
    """Rerun the page (as its poll does) until ``shown(app)``; the seconds it took."""
    started = time.perf_counter()
    while not shown(app):
        assert time.perf_counter() - started < timeout, "not shown in time"
        time.sleep(0.1)
        rerun(app)
    return time.perf_counter() - started


def model_free_arms_shown(app):
    return any("verdict" in table.value.columns for table in app.dataframe) and len(leaderboard(app)) == 4


def arm_states(app, column="state"):
    (table,) = [t.value for t in app.dataframe if "state" in t.value.columns]
    return dict(zip(table["arm"], table[column]))


def test_model_free_results_show_while_the_slow_arm_runs_and_cancel_keeps_them(sample_lab_db, litellm):
    app = run_page()
    clicked = upload_and_run(app, slow_model_spec(delay=4))
    rerun_until(app, model_free_arms_shown, FIRST_RESULTS_SECONDS)
    assert time.perf_counter() - clicked < FIRST_RESULTS_SECONDS
    rerun(app)  # the bar is drawn above the results: it shows the runs stored while the page drew them
    job = app.session_state["exp_job"]
    assert job.running, "the model-free results show before the slow arm ends"
    assert set(leaderboard(app)["arm"]) == {"full-history", "extractive", "window-8k", "truncate"}
    assert any("Probes on this case" in m.value for m in app.markdown), "the probe matrix fills in too"
    (bar,) = app.get("progress")
    assert "of 15 runs" in bar.proto.text
    states = arm_states(app)
    assert states.pop("slow-model") in ("running", "waiting") and set(states.values()) == {"done"}
    seconds = arm_states(app, "seconds")  # blank until an arm's first run finished, never "None"
    assert seconds.pop("slow-model") == "" and all(re.fullmatch(r"\d+\.\d\d", s) for s in seconds.values())
    assert any(w.value.startswith("This trial is incomplete") for w in app.warning)

    click(app, "Cancel")
    if job.running:
        assert "Cancelling" in app.get("progress")[0].proto.text
        assert [b for b in app.button if b.label == "Cancelling…"][0].disabled
    cancelled = time.perf_counter()
    assert job.wait(timeout=10)
    assert time.perf_counter() - cancelled < 4 + 1, "within a second of the model call in progress ending"
    finish_run(app)
    (warning,) = [w.value for w in app.warning if w.value.startswith("Cancelled")]
    # the two model calls in flight (concurrency 2) end and their runs are kept; the third never starts
    kept = len(job.results.runs)
    assert 12 <= kept < 15 and warning.startswith(f"Cancelled: {kept} of 15 runs finished")
    assert f"slow\\-model \\({kept - 12} of 3\\)" in warning
    assert {"full-history", "extractive", "window-8k", "truncate"} <= set(leaderboard(app)["arm"])


@pytest.fixture
def one_trial(sample_lab_db):
    spec = yaml.safe_load(SAMPLE_SPEC.read_text(encoding="utf-8"))
    spec["arms"] = [arm for arm in spec["arms"] if arm["strategy"] in ("none", "extractive", "window", "truncate")]
    spec["cases"] = [case for case in spec["cases"] if case["name"] == "coding"]
    with Store(sample_lab_db) as store:
        Experiments(store).run(spec)
    return sample_lab_db


def test_the_context_comparison_tells_apart_contexts_that_differ_past_their_previews(one_trial):
    """Before, two contexts whose last four messages matched (a window's cut is at the front) were "the same"."""
    app = run_page()
    app.selectbox(key="exp_diff_from:sample:1").select("full-history")
    app.selectbox(key="exp_diff_to:sample:1").select("truncate")
    rerun(app)
    assert not any("are the same" in c.value for c in app.code)
    (verdict,) = [w.value for w in app.warning if w.value.startswith("The contexts differ")]
    (diff,) = [c.value for c in app.code if c.language == "diff"]
    assert diff.startswith("--- full\\-history message ".replace("\\", "")) and "+++ truncate message " in diff
    (rows,) = [t.value for t in app.dataframe if "status" in t.value.columns]
    assert set(rows["status"]) <= {"changed", "only in the first", "only in the second"} and len(rows)
    assert "changed" in verdict
    app.selectbox(key="exp_diff_to:sample:1").select("full-history")
    rerun(app)
    assert any(s.value.startswith("The two contexts are identical") for s in app.success)


def compare_full_history_with_truncate():
    app = run_page()
    app.selectbox(key="exp_diff_from:sample:1").select("full-history")
    app.selectbox(key="exp_diff_to:sample:1").select("truncate")
    rerun(app)
    return [v.value for v in (*app.success, *app.warning) if v.value.startswith(("The contexts", "The two contexts"))]


def test_a_second_database_with_the_same_run_pks_shows_its_own_comparison(one_trial, tmp_path, monkeypatch):
    """Before, the comparison was cached by run pk alone, and a pk is only unique within one database:
    the second database's identical contexts showed the first one's differences."""
    assert compare_full_history_with_truncate()[0].startswith("The contexts differ")
    second = tmp_path / "second.db"
    shutil.copyfile(one_trial, second)
    with Store(second) as store, store.transaction() as conn:
        conn.execute("UPDATE experiment_runs SET context = (SELECT context FROM experiment_runs "
                     "WHERE arm = 'full-history') WHERE arm = 'truncate'")
    monkeypatch.setenv("MEMORYLAB_DB", str(second))
    (verdict,) = compare_full_history_with_truncate()
    assert verdict.startswith("The two contexts are identical")


def test_the_headline_and_the_table_round_a_saving_the_same_way(one_trial):
    with Store(one_trial) as store, store.transaction() as conn:
        conn.execute("UPDATE experiment_runs SET tokens_before = 200, tokens_after = 147 "
                     "WHERE arm <> 'full-history'")  # every compacting arm saves 26.5%
    app = run_page()
    board = leaderboard(app)
    saved = board.loc[board["arm"] != "full-history", "saved_pct"]
    assert set(saved) == {27}
    (score,) = [m for m in app.metric if m.label == "Its score"]
    assert score.proto.delta.endswith(" · saves 27%")
