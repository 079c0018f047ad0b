"""The Experiments page and the Compaction lab's quick A/B through AppTest, on a copy of the samples:
specs are loaded, edited, run in the background with the arms that need no model, and read back."""
import time

import pytest
import streamlit as st
import yaml
from streamlit.testing.v1 import AppTest

from memorylab import Session, Store
from memorylab.experiments import Experiments, register_window_handler
from memorylab.experiments.strategies import WINDOW_HANDLERS
from memorylab.history.window import simple_cut
from tests.helpers import ROOT, run_app_page, text_message

SAMPLE_SPEC = ROOT / "sample_data" / "experiments" / "sample.yaml"
SUPPORT = ("default", "support-bot", "support-order-4471")


def offline_sample(*cases):
    """The sample spec without its summarize arm (the embedded model takes minutes), on ``cases``."""
    spec = yaml.safe_load(SAMPLE_SPEC.read_text(encoding="utf-8"))
    spec["arms"] = [arm for arm in spec["arms"] if arm["strategy"] in ("none", "extractive", "window", "truncate")]
    spec["cases"] = [case for case in spec["cases"] if not cases or case["name"] in cases]
    return spec


@pytest.fixture
def ran_once(sample_lab_db):
    """The offline sample on its support and coding cases, run once (trial 1)."""
    with Store(sample_lab_db) as store:
        Experiments(store).run(offline_sample("support", "coding"))
    return sample_lab_db


def run_page(name="experiments.py", **state):
    return run_app_page(f"app_pages/{name}", **state)


def rerun(app):
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def click(app, label):
    (button,) = [b for b in app.button if b.label == label]
    button.click()
    return rerun(app)


def open_tab(app, tab):
    app.session_state["exp_tab"] = tab
    return rerun(app)


def finish_run(app):
    """Wait for the run the page started, then rerun as the page's poll does when it ends (a run that
    ended before the page's own rerun after Run has already shown its outcome)."""
    if "exp_job" in app.session_state:
        assert app.session_state["exp_job"].wait(timeout=30)
        rerun(app)
    return app


def shorten_the_window(app):
    """Set the window arm's max_length to 2,000 in the Arms table; returns the editor and the arm's row."""
    open_tab(app, "Arms")
    editor = app.data_editor[0]
    window = list(editor.value["name"]).index("window-8k")
    app.session_state[editor.key] = {"edited_rows": {window: {"max_length": 2000}}, "added_rows": [],
                                     "deleted_rows": []}
    rerun(app)
    return editor, window


def leaderboard(app):
    (table,) = [t.value for t in app.dataframe if "verdict" in t.value.columns]
    return table


def test_an_empty_store_says_how_to_start(sample_lab_db):
    app = run_page()
    assert app.title[0].value == "Experiments"
    assert any("No experiment in this store yet" in i.value for i in app.info)
    assert app.selectbox(key="exp_choice").options == [
        "New experiment", "New from the sample spec", "Upload a YAML spec"]
    assert not app.data_editor and not [b for b in app.button if b.label == "Run"]


def test_the_sample_spec_runs_its_no_model_arms_in_the_background(sample_lab_db):
    app = run_page()
    app.selectbox(key="exp_choice").select("New from the sample spec")
    rerun(app)
    (arms,) = app.data_editor
    assert list(arms.value["strategy"]) == ["none", "extractive", "summarize", "window", "truncate", "mask",
                                            "mask+summarize"]
    # Drop the model arms in the table, as a user deleting their rows does.
    app.session_state[arms.key] = {"edited_rows": {}, "added_rows": [], "deleted_rows": [2, 5, 6]}
    rerun(app)
    assert any("4 arms × 3 cases = 12 runs, as trial 1 of “sample”" in c.value for c in app.caption)
    click(app, "Run")
    assert app.session_state["exp_choice"] == "sample" and app.session_state["exp_tab"] == "Results"
    finish_run(app)
    assert any(s.value.startswith("Trial 1 of “sample”: 12 runs") for s in app.success)
    board = leaderboard(app)
    assert list(board["arm"]) == ["full-history", "truncate", "extractive", "window-8k"]
    assert board["score"].iloc[0] == 1 and set(board["verdict"]) == {"no threshold"}
    assert {m.label: m.value for m in app.metric}["Runs"] == "12"
    assert app.get("plotly_chart"), "the Pareto chart is drawn"
    assert [d.label for d in app.download_button] == ["Download CSV", "Download JSON", "Download leaderboard CSV"]
    with Store(sample_lab_db) as store:
        stored = Experiments(store).results("sample")
    assert stored.trial == 1 and len(stored.runs) == 12 and set(stored.arms) == set(board["arm"])


def test_a_second_run_is_trial_2_and_compares_with_trial_1(ran_once):
    app = run_page()
    assert app.selectbox(key="exp_choice").value == "sample" and app.session_state["exp_tab"] == "Results"
    shorten_the_window(app)
    click(app, "Run")
    finish_run(app)
    assert app.selectbox(key="exp_trial:sample").value == 2
    app.selectbox(key="exp_versus:sample:2").select(1)
    rerun(app)
    (comparison,) = [t.value for t in app.dataframe if "score_change" in t.value.columns]
    assert len(comparison) == 4 * 2
    changed = comparison[comparison["settings_changed"]]
    assert set(changed["arm"]) == {"window-8k"} and (changed["score_change"] <= 0).all()
    with Store(ran_once) as store:
        assert [t["trial"] for t in Experiments(store).trials("sample")] == [1, 2]


def test_edits_survive_switching_tabs_and_show_in_the_yaml(ran_once):
    app = run_page()
    editor, window = shorten_the_window(app)
    open_tab(app, "Cases and probes")
    open_tab(app, "YAML")
    (spec,) = [c.value for c in app.code if c.language == "yaml"]
    assert yaml.safe_load(spec)["arms"][window] == {"name": "window-8k", "strategy": "window", "max_length": 2000}
    open_tab(app, "Arms")
    assert app.data_editor[0].key != editor.key and app.data_editor[0].value["max_length"][window] == 2000


def test_the_probe_grids_blank_rows_show_nothing_but_the_default_kind_and_are_no_probes(sample_lab_db):
    app = run_page()
    app.selectbox(key="exp_choice").select("New from the sample spec")
    open_tab(rerun(app), "Cases and probes")
    grid = next(editor for editor in app.data_editor if editor.key.startswith("exp_probes:"))
    blank = grid.value.tail(4)
    assert set(blank["kind"]) == {"recall"} and set(blank.drop(columns="kind").to_numpy().ravel()) == {""}
    assert len(app.session_state["exp_draft"]["spec"]["cases"][0]["probes"]) == len(grid.value) - 4


def test_a_case_drills_down_to_outputs_a_diff_and_missed_probes(ran_once):
    app = run_page()
    assert app.selectbox(key="exp_case:sample:1").value == "support"
    assert app.multiselect(key="exp_side_by_side:sample:1").value == ["full-history", "truncate", "extractive"]
    outputs = [c.value for c in app.code if c.language != "diff"]
    assert outputs[0].startswith("… ") and "[assistant]" in outputs[0]  # the full history's newest messages
    with Store(ran_once) as store:
        summary = Experiments(store).results("sample").run("extractive", "support")["summary"]
    assert summary in outputs
    app.selectbox(key="exp_diff_to:sample:1").select("extractive")
    rerun(app)
    (verdict,) = [w.value for w in app.warning if w.value.startswith("The contexts differ")]
    assert "only in full\\-history" in verdict and "only in extractive" in verdict
    app.selectbox(key="exp_case:sample:1").select("coding")
    rerun(app)
    (matrix,) = [t.value for t in app.dataframe if "question" in t.value.columns]
    assert {"full-history", "window-8k"} <= set(matrix.columns) and (matrix["full-history"] == 1).all()


def test_a_bad_spec_upload_is_refused_with_one_message_naming_every_problem(sample_lab_db):
    app = run_page()
    app.selectbox(key="exp_choice").select("Upload a YAML spec")
    rerun(app)
    bad = {"name": "bad", "colour": "blue",
           "arms": [{"name": "s", "strategy": "summarize", "template": "no placeholder here"}],
           "cases": [{"name": "c", "session": "support-order-4471", "probes": []}]}
    app.file_uploader(key="exp_upload").set_value(("bad.yaml", yaml.safe_dump(bad).encode(), "application/yaml"))
    rerun(app)
    (error,) = app.error
    assert error.value.startswith("bad.yaml cannot run; nothing was run or saved")
    for problem in ("unknown key 'colour'", "{transcript}", "probes: must be a non-empty list"):
        assert problem in error.value
    assert not app.data_editor and not [b for b in app.button if b.label == "Run"]


def test_a_spec_naming_a_missing_session_is_refused_before_it_runs(sample_lab_db):
    app = run_page()
    app.selectbox(key="exp_choice").select("Upload a YAML spec")
    rerun(app)
    spec = offline_sample("support")
    spec["cases"][0]["session"] = "no-such-session"
    app.file_uploader(key="exp_upload").set_value(("gone.yaml", yaml.safe_dump(spec).encode(), "application/yaml"))
    rerun(app)
    click(app, "Run")
    assert any("case 'support'" in e.value and "no-such-session" in e.value for e in app.error)
    assert "exp_job" not in app.session_state
    with Store(sample_lab_db) as store:
        assert Experiments(store).listing() == []


def test_arms_are_duplicated_and_cases_gain_reviewed_proposals(ran_once):
    app = run_page()
    open_tab(app, "Arms")
    next(s for s in app.selectbox if s.label == "Arm to duplicate").select("extractive")
    click(app, "Duplicate the arm")
    assert list(app.data_editor[0].value["name"]) == ["full-history", "extractive", "extractive-copy", "window-8k",
                                                       "truncate"]
    # What "Propose probes with a model" leaves for review (the model call itself is the engine's to test).
    app.session_state["exp_proposed:support"] = {"arm": "extractive", "model": "a model", "probes": [
        {"id": "proposed-1", "kind": "artifact", "question": "Which ticket was opened?", "facts": ["SUP-20931"]},
        {"id": "refund-amount", "kind": "recall", "question": "How much is refunded?", "facts": ["€49.90"]}]}
    open_tab(app, "Cases and probes")
    click(app, "Add 2 probes to the case")
    click(app, "Save")
    assert any(s.value == "Saved “sample”." for s in app.success)
    with Store(ran_once) as store:
        spec = Experiments(store).get("sample")
    assert [arm.name for arm in spec.arms][2] == "extractive-copy"
    assert [p.id for p in spec.case("support").probes][-2:] == ["proposed-1", "refund-amount-2"]


@pytest.fixture
def slow_window():
    """A window handler that takes 0.1 s, so a run of 40 arms is far from done when Cancel is pressed."""
    def slow_cut(*arguments):
        time.sleep(0.1)
        return simple_cut(*arguments)

    register_window_handler("slow_cut", slow_cut)
    yield "slow_cut"
    WINDOW_HANDLERS.pop("slow_cut")


def test_a_run_can_be_cancelled_and_keeps_what_finished(sample_lab_db, slow_window):
    spec = offline_sample("support") | {"name": "slow", "concurrency": 1}
    spec["arms"] = [{"name": f"window-{n}", "strategy": "window", "max_length": 100 * n, "handler": slow_window}
                    for n in range(1, 41)]
    app = run_page()
    app.selectbox(key="exp_choice").select("Upload a YAML spec")
    rerun(app)
    app.file_uploader(key="exp_upload").set_value(("slow.yaml", yaml.safe_dump(spec).encode(), "application/yaml"))
    rerun(app)
    click(app, "Run")
    assert any(i.value.startswith("Trial 1 is running") for i in app.info) and app.get("progress")
    click(app, "Cancel")
    finish_run(app)
    (warning,) = [w.value for w in app.warning if w.value.startswith("Cancelled")]
    with Store(sample_lab_db) as store:
        kept = Experiments(store).listing()[0]["runs"]
    assert kept < 40 and warning.startswith(f"Cancelled: {kept} of 40 runs finished and are kept as a trial.")
    assert warning.endswith(f"and {40 - kept - 5} more.")  # the arms not finished: five named, the rest counted


def test_use_this_arm_opens_the_compaction_lab_with_its_settings(ran_once):
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    rerun(app)
    rerun(app.switch_page("app_pages/experiments.py"))
    assert app.selectbox(key="exp_use_arm:sample:1").value == "extractive"
    click(app, "Use this arm in the Compaction lab")
    assert app.title[0].value == "Compaction lab"
    assert app.session_state["session_ref"] == SUPPORT
    assert (app.session_state["main_head"], app.session_state["main_tail"], app.session_state["main_min_tail"]) == \
        (2, 1200, 2)
    assert app.number_input(key="main_tail").value == 1200
    assert any("Settings of arm “extractive”" in s.value for s in app.success)
    assert not any(i.value.startswith("Nothing to compact") for i in app.info)
    summarizer = app.selectbox(key="main_strategy")
    assert summarizer.value == "extractive" and app.text_input(key="main_model").disabled
    app.switch_page("app_pages/compaction_lab.py")  # where the app now is: AppTest reruns the page it was given
    click(app, "Run the summarizer")  # the arm's own summarizer: its span's sentences, no model asked
    proposal = app.session_state["proposal"]
    assert proposal["strategy"] == "extractive" and proposal["summary"].startswith("Extractive summary of ")
    assert app.text_area(key="proposal_text").value == proposal["summary"]


def test_the_compaction_labs_first_view_shows_a_plan_on_every_sample_conversation(sample_lab_db):
    app = run_page("compaction_lab.py")
    for ref in (SUPPORT, ("default", "project-assistant", "long-migration-project"),
                ("default", "code-helper", "coding-csv-importer"),
                ("default", "travel-planner", "trip-planning-branches")):
        app.session_state["session_ref"] = ref
        rerun(app)
        assert not any(i.value.startswith("Nothing to compact") for i in app.info), ref
        metrics = {m.label: m.value for m in app.metric}
        assert int(metrics["Messages summarized"]) > 0, ref
        with Store(sample_lab_db) as store:
            tokens = sum(m["tokens"] for m in Session.open(store, ref[2], agent_id=ref[1]).get_history())
        assert app.number_input(key="main_tail").value == max(round(tokens // 4, -2), 100), ref


def test_the_quick_ab_runs_two_extractive_arms_as_a_stored_experiment(sample_lab_db):
    app = run_page("compaction_lab.py")
    for side in ("A", "B"):
        app.selectbox(key=f"{side}_strategy").select("extractive")
    rerun(app)
    click(app, "Summarize both and compare")
    kept = [m.value for m in app.metric if m.label == "Facts kept"]
    assert len(kept) == 2 and all(value.endswith(" / 7") for value in kept)
    assert len([c for c in app.code if c.value and c.value != "(empty)"]) >= 2
    with Store(sample_lab_db) as store:
        results = Experiments(store).results("quick-ab-support-order-4471")
    assert results.arms == ["A", "B"] and {run["strategy"] for run in results.runs} == {"extractive"}
    assert [p["probe"] for p in results.runs[0]["scores"]] == [f"fact-{n}" for n in range(1, 8)]
    assert app.session_state["exp_open"] == "quick-ab-support-order-4471"
    page = run_page(exp_open=app.session_state["exp_open"])
    assert page.selectbox(key="exp_choice").value == "quick-ab-support-order-4471"
    assert list(leaderboard(page)["arm"]) and page.session_state["exp_tab"] == "Results"


def large_experiment(store, arms=20, cases=10, probes=20):
    """``arms`` window arms on ``cases`` short sessions with ``probes`` probes each: 200 runs in about a second."""
    specs = []
    for number in range(cases):
        session = Session.create(store, f"bench-{number}")
        for index in range(8):
            session.append_message(text_message(f"b{number}-{index}",
                                                 f"Ticket SUP-{number}{index} costs {index * 7} euros.",
                                                 "user" if index % 2 == 0 else "assistant"))
        specs.append({"name": f"case-{number}", "session": f"bench-{number}", "probes": [
            {"id": f"p{p}", "question": f"What does ticket SUP-{number}{p % 8} cost?",
             "facts": [f"SUP-{number}{p % 8}"]} for p in range(probes)]})
    return {"name": "large", "arms": [{"name": f"window-{n}", "strategy": "window", "max_length": 40 * n}
                                      for n in range(1, arms + 1)], "cases": specs}


def test_a_finished_20_arm_10_case_20_probe_experiment_renders_within_a_second(sample_lab_db):
    with Store(sample_lab_db) as store:
        results = Experiments(store).run(large_experiment(store))
    assert len(results.runs) == 200 and sum(len(run["scores"]) for run in results.runs) == 4000
    app = run_page()
    assert len(leaderboard(app)) == 20
    firsts, agains = [], []
    for _ in range(3):  # the best of three: a shared machine's load is not the page's cost
        st.cache_resource.clear()  # as a fresh server: the store and every result read again
        started = time.perf_counter()
        rerun(app)
        firsts.append(time.perf_counter() - started)
        started = time.perf_counter()
        rerun(app)
        agains.append(time.perf_counter() - started)
    assert len(leaderboard(app)) == 20
    assert min(firsts) < 1.0 and min(agains) < 1.0, (firsts, agains)
