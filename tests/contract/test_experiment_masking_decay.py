"""Masking arms and decay runs on both backends: what ``mask`` keeps and replaces, when
``mask+summarize`` calls its model (litellm's ``mock_response``), and a decay run's per-round scores,
retention curve, chart and JSON."""
import json

import pytest

from memorylab import InvalidInputError
from memorylab.cli import main
from memorylab.experiments import Experiments
from memorylab.history.truncation import MASKED_OUTPUT_PREFIX
from tests.contract.test_experiments import SUMMARY, load_sample_sessions, sample_spec

MOCKED = {"model": "openai/gpt-4o-mini", "completion": {"mock_response": SUMMARY}}


@pytest.fixture
def samples(store):
    load_sample_sessions(store)
    return store


def tool_outputs(context):
    return [part["output"] for message in context for part in message.get("parts") or ()
            if part.get("type", "").startswith("tool-") and "output" in part]


def test_a_mask_arm_replaces_older_tool_outputs_and_keeps_the_recent_window_whole(samples):
    spec = sample_spec(strategies=("none",))
    spec["arms"].append({"name": "mask", "strategy": "mask", "keep_recent": 10})
    spec["cases"] = [case for case in spec["cases"] if case["name"] == "coding"]
    experiments = Experiments(samples)
    results = experiments.run(spec)
    run = results.run("mask", "coding")
    full, context = experiments.context(results.run("full-history", "coding")), experiments.context(run)
    assert run["model"] is None and run["usage"] == {} and run["cost"] == 0
    assert run["tokens_after"] < run["tokens_before"] == results.run("full-history", "coding")["tokens_after"]
    older, recent = tool_outputs(context[:-10]), tool_outputs(context[-10:])
    assert older and recent
    assert all(str(output).startswith(MASKED_OUTPUT_PREFIX) or len(str(output)) < 80 for output in older)
    assert recent == tool_outputs(full[-10:])  # the window is whole
    texts = [p.get("text") for m in context for p in m["parts"] if p.get("type") == "text"]
    assert texts == [p.get("text") for m in full for p in m["parts"] if p.get("type") == "text"]


def test_mask_then_summarize_calls_its_model_only_where_masking_is_not_enough(samples, litellm):
    spec = sample_spec(strategies=())
    spec["arms"] = [{"name": "mask+summarize", "strategy": "mask+summarize", "token_budget": 10000,
                     "protect_head": 2, "tail_token_budget": 1200, **MOCKED}]
    results = Experiments(samples).run(spec)
    migration, coding = results.run("mask+summarize", "migration"), results.run("mask+summarize", "coding")
    assert migration["model"] == "openai/gpt-4o-mini" and migration["summary"] == SUMMARY
    assert migration["cost"] > 0 and migration["tokens_after"] <= 10000
    assert coding["model"] is None and coding["summary"] is None and coding["usage"] == {}
    assert coding["tokens_after"] <= 10000 < coding["tokens_before"]  # masking alone fit the budget
    summary = results.arm_summaries()[0]
    assert summary["strategy"] == "mask+summarize" and summary["saved_pct"] > 0 and summary["cost"] > 0


def test_a_decay_run_of_two_arms_over_4_rounds_scores_early_probes_after_each_round(samples, tmp_path):
    spec = sample_spec(strategies=())
    spec["cases"] = [case for case in spec["cases"] if case["name"] in ("migration", "coding")]
    spec["arms"] = [
        {"name": "extractive-decay", "strategy": "extractive", "protect_head": 2, "tail_token_budget": 600,
         "rounds": [1, 2, 3, 4]},
        {"name": "mask-decay", "strategy": "mask", "rounds": [1, 2, 3, 4], "compact_at": 3000},
    ]
    results = Experiments(samples).run(spec)
    curve = results.retention()
    assert [(row["arm"], row["round"]) for row in curve] == [(arm, n) for arm in ("extractive-decay", "mask-decay")
                                                            for n in (1, 2, 3, 4)]
    extractive = [row["score"] for row in curve if row["arm"] == "extractive-decay"]
    assert extractive[0] > extractive[-1]  # summaries of summaries forget early facts
    assert all(row["probes"] > 0 for row in curve)
    run = results.run("extractive-decay", "migration")
    early = [score for score in run["scores"] if "rounds" in score]
    assert early and all([entry["round"] for entry in score["rounds"]] == [1, 2, 3, 4] for score in early)
    assert run["tokens_after"] < run["tokens_before"] and run["summary"].startswith("Extractive summary")
    figure = results.decay_figure()
    assert [trace.name for trace in figure.data] == ["extractive-decay", "mask-decay"]
    assert list(figure.data[0].y) == extractive
    assert results.to_dict()["retention"] == curve


def test_repeated_summaries_each_update_the_last(samples, litellm):
    spec = sample_spec(strategies=())
    spec["cases"] = spec["cases"][:1]
    spec["arms"] = [{"name": "decay", "strategy": "summarize", "protect_head": 2, "tail_token_budget": 1200,
                     "rounds": [1, 2], "compact_at": 8000, **MOCKED}]
    run = Experiments(samples).run(spec).run("decay", "migration")
    prompts = run["request"]["prompts"]
    assert len(prompts) >= 2 and "<previous_summary>" not in prompts[0]
    assert all(f"<previous_summary>\n{SUMMARY}\n</previous_summary>" in prompt for prompt in prompts[1:])
    assert run["usage"]["summary"]["total_tokens"] > 0 and run["summary"] == SUMMARY


def test_eval_json_holds_the_retention_curve(samples, store_target, tmp_path):
    spec = sample_spec(strategies=())
    spec["cases"] = spec["cases"][2:]
    spec["arms"] = [{"name": "decay", "strategy": "extractive", "rounds": [1, 2]}]
    path, out = tmp_path / "decay.yaml", tmp_path / "results.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    assert main(["--db", str(store_target), "eval", str(path), "--json", str(out)]) == 0
    retention = json.loads(out.read_text(encoding="utf-8"))["retention"]
    assert [row["round"] for row in retention] == [1, 2] and all(0 <= row["score"] <= 1 for row in retention)


@pytest.mark.parametrize("rounds, compact_at, fragment", [
    ([2, 1], None, "rounds must be a list of increasing positive integers"),
    ([], None, "rounds must be a list of increasing positive integers"),
    ([0, 1], None, "rounds must be a list of increasing positive integers"),
    ([1, 2], 0, "compact_at must be at least 1 token"),
    ([1, 2], "big", "compact_at must be a non-negative integer"),
])
def test_bad_decay_settings_are_refused_before_anything_runs(samples, rounds, compact_at, fragment):
    spec = sample_spec(strategies=())
    spec["arms"] = [{"name": "decay", "strategy": "extractive", "rounds": rounds, "compact_at": compact_at}]
    with pytest.raises(InvalidInputError, match=fragment):
        Experiments(samples).run(spec)
