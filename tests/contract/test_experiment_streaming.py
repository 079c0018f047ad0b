"""A trial streams on both backends: the arms that need no model run before a slow model arm and are
stored (and readable) while it still runs; Cancel stops a model arm at its next model call (the
embedded model's reply, streamed for that, between its pieces: tests/slow); each arm's
progress and the time left are known from the runs so far; ``memorylab eval`` prints each run as it
finishes. The slow arm is a summarize arm whose mocked model reply (litellm's ``mock_response``) waits
``mock_delay`` seconds."""
import time

import pytest
import yaml

from memorylab.cli import main
from memorylab.experiments import Experiments
from memorylab.io import import_session, read_export
from memorylab.samples import SAMPLE_DIR

SAMPLE_SPEC = SAMPLE_DIR / "experiments" / "sample.yaml"
MODEL_FREE = ("none", "extractive", "window", "truncate")


@pytest.fixture
def samples(store):
    for name in ("long_project", "support_order", "coding_assistant"):
        import_session(store, read_export(SAMPLE_DIR / "sessions" / f"{name}.json"))
    return store


def slow_model_arm(delay, **settings):
    return {"name": "slow-model", "strategy": "summarize", "model": "openai/gpt-4o-mini", "protect_head": 2,
            "tail_token_budget": 1200, "completion": {"mock_response": "## Topic\nA migration.", "mock_delay": delay},
            **settings}


def spec_with_slow_arm_first(delay, **settings):
    """The sample spec, its model arm replaced by a slow one listed first (arm by arm, it would run first)."""
    spec = yaml.safe_load(SAMPLE_SPEC.read_text(encoding="utf-8"))
    spec["arms"] = [slow_model_arm(delay, **settings), *(a for a in spec["arms"] if a["strategy"] in MODEL_FREE)]
    return spec


def test_model_free_arms_finish_first_and_are_stored_while_the_slow_arm_runs(samples, litellm):
    experiments = Experiments(samples)
    started, finished, readable = time.perf_counter(), [], []

    def progress(done, total, run):
        finished.append((run["arm"], time.perf_counter() - started))
        if done == 12:  # every model-free run: the trial is readable with them while the model still writes
            readable.append(len(experiments.results("sample").runs))

    results = experiments.run(spec_with_slow_arm_first(1.0), progress=progress)
    order = [arm for arm, _ in finished]
    assert set(order[:12]) == {"full-history", "extractive", "window-8k", "truncate"} and \
        order[12:] == ["slow-model"] * 3
    assert finished[11][1] < 1.0, "the model-free runs are in before the first model call ends"
    assert readable == [12] and results.complete


def test_cancel_stops_a_model_arm_within_a_second_of_its_model_call_ending(samples, litellm):
    delay = 1.0
    spec = spec_with_slow_arm_first(delay, chunk_tokens=300)  # a hundred model calls: minutes uncancelled
    spec["arms"], spec["cases"] = spec["arms"][:2], spec["cases"][:1]
    job = Experiments(samples).start(spec)
    while not any(arm["state"] == "running" and arm["arm"] == "slow-model" for arm in job.status.arms()):
        time.sleep(0.01)
    cancelled = time.perf_counter()
    job.cancel()
    assert job.wait(timeout=30)
    latency = time.perf_counter() - cancelled
    assert latency < delay + 1.0, f"cancel took {latency:.2f} s with model calls of {delay} s"
    assert job.error is None and not job.results.complete
    assert {run["arm"] for run in job.results.runs} == {"full-history"}, "what finished is kept, nothing else"
    assert {arm["arm"]: arm["state"] for arm in job.status.arms()} == {"slow-model": "waiting", "full-history": "done"}


def test_each_arms_progress_and_the_time_left_follow_the_runs(samples, litellm):
    experiments = Experiments(samples)
    job = experiments.start(spec_with_slow_arm_first(0.5) | {"concurrency": 1})
    while job.status.done < 12:
        time.sleep(0.01)
    states = {arm["arm"]: arm["state"] for arm in job.status.arms()}
    assert states.pop("slow-model") in ("waiting", "running") and set(states.values()) == {"done"}
    assert job.status.seconds_left() is None, "no model run finished yet: nothing to estimate it from"
    while job.status.done < 13:
        time.sleep(0.01)
    assert 2 * 0.5 <= job.status.seconds_left() < 2 * 0.5 + 1, "two runs left at the first one's pace"
    assert job.wait(timeout=30) and job.results.complete
    assert job.status.seconds_left() == 0 and {arm["state"] for arm in job.status.arms()} == {"done"}


def test_eval_prints_each_run_as_it_finishes_with_the_time_left(tmp_path, capsys, litellm):
    spec = spec_with_slow_arm_first(0.2)
    spec["cases"] = spec["cases"][1:2]
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    assert main(["--db", str(tmp_path / "lab.db"), "eval", str(path), "--with-samples"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[")]
    assert [line.split("]")[0] for line in lines] == [f"[{n}/5" for n in range(1, 6)]
    assert lines[-1].startswith("[5/5] slow-model on support: score ") and lines[-1].endswith(" s")
    assert "time left: estimating…" in lines[0], "the model arm has not run yet: its time is unknown"
    assert all(" in 0.0" in line for line in lines[:4])
