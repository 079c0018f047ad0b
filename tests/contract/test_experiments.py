"""Experiments on both backends: specs refused before anything runs, arms run over sample cases and
scored by their probes, every trial kept, model failures recorded on their run, cancel keeps what
finished, and the exports hold what the command line and CI read."""
import copy
import csv
import io
import json
import threading
import time

import pytest
import yaml

from memorylab import DamagedRowWarning, InvalidInputError, NotFoundError, Session
from memorylab.errors import ModelOutputError
from memorylab.experiments import Experiments, load_spec, propose_probes, register_window_handler
from memorylab.experiments.strategies import WINDOW_HANDLERS, plan_for
from memorylab.history.window import simple_cut
from memorylab.io import import_session, read_export
from memorylab.samples import SAMPLE_DIR

SAMPLE_SPEC = SAMPLE_DIR / "experiments" / "sample.yaml"
NO_MODEL_STRATEGIES = ("none", "extractive", "window", "truncate")
SUMMARY = ("## Topic\nMigrating MySQL 5.7 to PostgreSQL 16.\n## Key Points\nThe orders table is 48 GB; "
           "Priya Raman is our DBA.\n## Current State\nDry runs done.\n## Open Items\nNone.")


def load_sample_sessions(store):
    for name in ("long_project", "support_order", "coding_assistant"):
        import_session(store, read_export(SAMPLE_DIR / "sessions" / f"{name}.json"))


@pytest.fixture
def samples(store):
    load_sample_sessions(store)
    return store


def sample_spec(*, strategies=NO_MODEL_STRATEGIES, **changes):
    spec = yaml.safe_load(SAMPLE_SPEC.read_text(encoding="utf-8"))
    spec["arms"] = [arm for arm in spec["arms"] if arm["strategy"] in strategies]
    return spec | changes


def mocked_summarizer(name="mocked", **settings):
    return {"name": name, "strategy": "summarize", "model": "openai/gpt-4o-mini", "protect_head": 2,
            "tail_token_budget": 1200, "completion": {"mock_response": SUMMARY}, **settings}


# -- the spec ------------------------------------------------------------------------------------------

def test_the_sample_spec_reads_and_round_trips_through_yaml():
    spec = load_spec(SAMPLE_SPEC)
    assert {arm.strategy for arm in spec.arms} == {"none", "extractive", "summarize", "window", "truncate", "mask",
                                                   "mask+summarize"}
    assert [case.session for case in spec.cases] == ["long-migration-project", "support-order-4471",
                                                     "coding-csv-importer"]
    assert len(spec.case("migration").probes) >= 12
    assert {probe.kind for case in spec.cases for probe in case.probes} == {"recall", "artifact", "continuation",
                                                                             "decision"}
    assert Experiments.spec(yaml.safe_load(spec.to_yaml())) == spec


def test_every_problem_in_a_spec_is_refused_at_once_and_nothing_is_saved(samples):
    spec = sample_spec()
    spec["colour"] = "blue"
    spec["arms"][1]["tail_budget"] = 100
    spec["arms"].append({"name": "bad-template", "strategy": "summarize", "template": "Summarize please."})
    spec["arms"].append({"name": "mystery", "strategy": "mystery"})
    spec["arms"].append({"name": "truncate", "strategy": "none"})
    spec["cases"][1]["probes"] = []
    experiments = Experiments(samples)
    with pytest.raises(InvalidInputError) as refused:
        experiments.run(spec)
    message = str(refused.value)
    for fragment in ("unknown key 'colour'", "unknown key 'tail_budget'", "no {transcript} placeholder",
                     "strategy must be one of", "cases[1] 'support' probes: must be a non-empty list",
                     "arm names must be unique; repeated: 'truncate'", "nothing was run or saved"):
        assert fragment in message
    assert experiments.listing() == []


def test_a_case_naming_a_missing_session_or_leaf_is_refused_before_anything_runs(samples):
    spec = sample_spec()
    spec["cases"][0]["session"] = "no-such-session"
    spec["cases"][2]["leaf"] = "no-such-message"
    experiments = Experiments(samples)
    with pytest.raises(InvalidInputError) as refused:
        experiments.run(spec)
    assert "case 'migration': no session 'no-such-session'" in str(refused.value)
    assert "case 'coding': session 'coding-csv-importer' has no message 'no-such-message'" in str(refused.value)
    assert experiments.listing() == []


# -- running -------------------------------------------------------------------------------------------

def test_arms_are_scored_by_their_probes_and_the_scores_discriminate(samples):
    experiments = Experiments(samples)
    results = experiments.run(sample_spec())
    board = {row["arm"]: row for row in results.leaderboard().to_dict("records")}
    assert board["full-history"]["score"] == 1.0  # every probe's facts are in the stored history
    assert board["full-history"]["tokens_after"] == board["full-history"]["tokens_before"]
    for arm in ("extractive", "window-8k"):
        assert board[arm]["score"] < 1.0 and board[arm]["tokens_after"] < board[arm]["tokens_before"]
    assert board["extractive"]["score"] != board["window-8k"]["score"]
    assert results.complete and len(results.runs) == 4 * 3
    assert experiments.results("sample").runs == results.runs  # what a run returns is what reads back
    missed = results.missed_probes("window-8k")
    assert len(missed) > 0 and set(missed["case"]) <= {"migration", "support", "coding"}
    first = missed.iloc[0]
    run = results.run("window-8k", first["case"])
    assert next(s for s in run["scores"] if s["probe"] == first["probe"])["missed"]


def test_the_compacted_context_is_what_the_model_would_see_next_turn(samples):
    experiments = Experiments(samples)
    results = experiments.run(sample_spec(strategies=("extractive",)))
    run = results.run("extractive", "migration")
    context = experiments.context(run)
    session = Session.open(samples, "long-migration-project", agent_id="project-assistant")
    spec = load_spec(SAMPLE_SPEC)
    history = session.get_history(spec.case("migration").leaf)
    plan = plan_for(spec.arm("extractive"), history)
    assert [m["id"] for m in context] == [m["id"] for m in plan.head] + ["compaction_experiment"] + \
        [m["id"] for m in plan.tail]
    assert context[len(plan.head)]["parts"][0]["text"] == run["summary"]
    assert run["tokens_after"] == sum(m["tokens"] for m in context)
    assert session.get_compactions() == []  # an experiment never writes to the session


def test_rerunning_keeps_every_trial_and_two_trials_compare(samples):
    experiments = Experiments(samples)
    experiments.run(sample_spec())
    changed = sample_spec()
    next(arm for arm in changed["arms"] if arm["strategy"] == "window")["max_length"] = 30000
    second = experiments.run(changed)
    assert second.trial == 2
    assert [t["trial"] for t in experiments.trials("sample")] == [1, 2]
    assert experiments.results("sample", trial=1).run("window-8k", "migration")["arm_settings"]["max_length"] == 8000
    comparison = experiments.compare("sample", 1, 2)
    window = comparison[(comparison["arm"] == "window-8k") & (comparison["case"] == "migration")].iloc[0]
    assert window["settings_changed"] and window["score_change"] > 0
    unchanged = comparison[comparison["arm"] == "extractive"]
    assert not unchanged["settings_changed"].any() and (unchanged["score_change"] == 0).all()


def test_saved_experiments_read_back_and_delete_with_their_runs(samples):
    experiments = Experiments(samples)
    spec = experiments.save(sample_spec())
    assert experiments.get("sample") == spec
    with pytest.raises(NotFoundError, match="has not been run yet"):
        experiments.results("sample")
    experiments.run(spec)
    assert experiments.listing()[0] | {"updated_at": None, "last_run": None} == {
        "name": "sample", "description": spec.description, "arms": 4, "cases": 3,
        "probes": sum(len(c.probes) for c in spec.cases), "trials": 1, "runs": 12, "updated_at": None, "last_run": None}
    assert experiments.delete("sample") and experiments.listing() == []
    assert samples.experiments.runs(1) == []
    with pytest.raises(NotFoundError):
        experiments.get("sample")


def test_tenants_do_not_see_each_others_experiments(samples):
    Experiments(samples).save(sample_spec())
    assert Experiments(samples, tenant_id="other").listing() == []


# -- model arms ------------------------------------------------------------------------------------------

def test_a_summarize_arm_stores_its_summary_request_usage_and_cost(samples, litellm):
    spec = sample_spec(strategies=("none",))
    spec["arms"].append(mocked_summarizer())
    results = Experiments(samples).run(spec)
    run = results.run("mocked", "migration")
    assert run["error"] is None and run["summary"] == SUMMARY
    assert run["request"]["model"] == "openai/gpt-4o-mini" and "<transcript>" in run["request"]["prompts"][0]
    assert run["usage"]["summary"]["total_tokens"] > 0 and run["cost"] > 0
    assert run["summary_tokens"] > 0 and run["model"] == "openai/gpt-4o-mini"
    kept = {s["probe"]: s for s in run["scores"]}
    assert kept["orders-table-size"]["score"] == 1.0  # "48 GB" is in the mocked summary


def test_a_long_span_is_summarized_in_chunks_each_updating_the_summary_so_far(samples, litellm):
    spec = sample_spec(strategies=())
    spec["arms"] = [mocked_summarizer(chunk_tokens=2000)]
    spec["cases"] = spec["cases"][:1]
    run = Experiments(samples).run(spec).run("mocked", "migration")
    prompts = run["request"]["prompts"]
    assert len(prompts) > 3
    assert "<previous_summary>" not in prompts[0]
    assert all(f"<previous_summary>\n{SUMMARY}\n</previous_summary>" in prompt for prompt in prompts[1:])


def test_a_failed_model_call_is_recorded_on_its_run_and_the_experiment_goes_on(samples, litellm):
    spec = sample_spec(strategies=("none", "extractive"))
    spec["arms"].append(mocked_summarizer("broken", model="no-such-provider/no-such-model", completion={}))
    results = Experiments(samples).run(spec)
    broken = [run for run in results.runs if run["arm"] == "broken"]
    assert len(broken) == 3 and all(run["error"].startswith("ModelError") for run in broken)
    assert all(run["score"] is None for run in broken)
    assert all(run["error"] is None for run in results.runs if run["arm"] != "broken")
    summary = next(a for a in results.arm_summaries() if a["arm"] == "broken")
    assert summary["score"] == 0.0 and summary["errors"] == 3


def test_a_grader_answers_from_the_context_alone_and_its_verdict_is_the_score(samples, litellm):
    spec = sample_spec(strategies=("window",))
    spec["cases"] = [spec["cases"][1] | {"probes": spec["cases"][1]["probes"][:2]}]
    spec["grader"] = {"answer_model": "openai/gpt-4o-mini", "judge_model": "openai/gpt-4o-mini",
                      "completion": {"mock_response": "SCORE: 0.5 - it states part of it."}}
    run = Experiments(samples).run(spec).runs[0]
    for score in run["scores"]:
        assert score["graded_score"] == 0.5 and score["score"] == 0.5
        assert score["question"] in score["answer_prompt"] and "<conversation>" in score["answer_prompt"]
        assert score["answer"] in score["judge_prompt"] and score["judge_output"].startswith("SCORE")
    assert run["usage"]["grading"]["total_tokens"] > 0 and run["score"] == 0.5


def test_probes_proposed_by_a_model_are_read_leniently_and_checked(samples, litellm):
    history = Session.open(samples, "support-order-4471", agent_id="support-bot").get_history()
    reply = ('Here you go:\n[{"kind": "recall", "question": "Which order was refunded?", "facts": ["A-4471"], '
             '"answer": "Order A-4471."}, {"kind": "made-up", "question": "Refund amount?", "facts": ["49.90"]}, '
             '{"question": ""}]')
    probes = propose_probes(history[:8], model="openai/gpt-4o-mini", mock_response=reply)
    assert [(p.kind, p.facts) for p in probes] == [("recall", ("A-4471",)), ("recall", ("49.90",))]
    with pytest.raises(ModelOutputError, match="no JSON list"):
        propose_probes(history[:8], model="openai/gpt-4o-mini", mock_response="I cannot do that.")


# -- stopping, exporting, damage ----------------------------------------------------------------------

@pytest.fixture
def slow_window():
    """A window handler taking 0.05 s, so runs finish slower than a cancel is seen."""
    def slow_cut(*arguments):
        time.sleep(0.05)
        return simple_cut(*arguments)

    register_window_handler("slow_cut", slow_cut)
    yield {"name": "slow", "strategy": "window", "max_length": 2000, "handler": "slow_cut"}
    WINDOW_HANDLERS.pop("slow_cut")


def test_cancel_stops_the_runs_not_started_and_keeps_those_that_finished(samples, slow_window):
    cancel = threading.Event()
    experiments = Experiments(samples)
    spec = sample_spec(strategies=())
    spec["arms"] = [slow_window | {"name": f"slow-{n}"} for n in range(4)]
    results = experiments.run(spec, concurrency=1,
                              progress=lambda done, total, run: done == 2 and cancel.set(), cancel=cancel)
    assert 2 <= len(results.runs) < 12 and not results.complete
    assert experiments.results("sample").trial == 1 and len(experiments.results("sample").runs) == len(results.runs)


def test_results_export_to_json_csv_and_dataframes(samples, tmp_path):
    results = Experiments(samples).run(sample_spec())
    exported = json.loads(results.to_json(tmp_path / "results.json"))
    assert exported == json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    for arm in exported["arms"]:
        assert {"name", "strategy", "score", "tokens_before", "tokens_after", "cost"} <= set(arm)
        assert 0 <= arm["score"] <= 1
    assert all("context" not in run for run in exported["runs"])
    rows = list(csv.DictReader(io.StringIO(results.to_csv())))
    assert len(rows) == 12 and {"arm", "case", "score", "tokens_saved"} <= set(rows[0])
    assert len(results.probes_frame()) == 4 * sum(len(c["probes"]) for c in sample_spec()["cases"])
    assert "<table>" in results._repr_html_() and "full-history" in results._repr_html_()


def test_a_damaged_run_row_is_left_out_and_named(samples):
    experiments = Experiments(samples)
    experiments.run(sample_spec(strategies=("none",)))
    with samples.transaction() as conn:
        conn.execute("UPDATE experiment_runs SET scores = '{broken' WHERE case_name = 'support'")
    with pytest.warns(DamagedRowWarning, match=r"experiment run \d+: its stored scores is not readable JSON"):
        results = experiments.results("sample")
    assert {run["case_name"] for run in results.runs} == {"migration", "coding"}


def test_hostile_text_in_a_spec_is_stored_and_shown_as_text(samples):
    spec = sample_spec(strategies=("none",))
    spec["description"] = "<script>alert(1)</script> ' OR 1=1; --"
    spec["cases"] = [copy.deepcopy(spec["cases"][1])]
    spec["cases"][0]["probes"][0]["question"] = "<img src=x onerror=alert(1)> \"quoted\" AND NOT"
    experiments = Experiments(samples)
    results = experiments.run(spec)
    assert experiments.get("sample").description == spec["description"]
    assert "<script>" not in experiments.get("sample")._repr_html_()
    assert results.runs[0]["scores"][0]["question"] == spec["cases"][0]["probes"][0]["question"]


def test_a_background_job_counts_its_runs_and_a_cancel_before_any_finished_keeps_nothing(samples):
    experiments = Experiments(samples)
    job = experiments.start(sample_spec())
    assert job.wait(timeout=60) and job.error is None
    assert (job.done, job.total, job.trial) == (12, 12, 1) and job.results.complete
    with pytest.raises(InvalidInputError, match="no session 'gone'"):
        experiments.start(sample_spec(cases=[{**sample_spec()["cases"][1], "session": "gone"}]))
    cancel = threading.Event()
    cancel.set()
    results = experiments.run(sample_spec(), concurrency=1, cancel=cancel)
    assert results.trial == 2 and not results.complete and results.runs == []


def test_a_run_keeps_its_branch_messages_by_reference_and_says_when_one_is_gone(samples):
    experiments = Experiments(samples)
    results = experiments.run(sample_spec(strategies=("none", "window")))
    session = Session.open(samples, "support-order-4471", agent_id="support-bot")
    full = results.run("full-history", "support")
    assert experiments.context(full) == session.get_history()
    stored = samples.experiments.run_context(full["pk"])
    assert all(set(message) == {"ref"} for message in stored)  # no copy of the session in the run
    window = results.run("window-8k", "support")
    assert window["tokens_after"] <= window["tokens_before"]  # kept messages count as stored, not re-rendered
    session.delete_messages([session.get_history()[-1]["id"]])
    rebuilt = experiments.context(full)
    assert "is no longer stored in its session" in rebuilt[-1]["parts"][0]["text"]
    assert rebuilt[:-1] == session.get_history()
