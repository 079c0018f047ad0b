"""The sample experiment offline: every arm of sample_data/experiments/sample.yaml, the embedded
model's summarize arm included, through ``memorylab eval`` in a fresh process, on the support case
(the one short enough for the embedded model to summarize in one request); and a Cancel that stops
the embedded model mid-reply."""
import json
import subprocess
import sys
import threading
import time

import yaml

from memorylab import Store
from memorylab.experiments import Experiments
from memorylab.experiments.cancellation import complete_unless_cancelled
from memorylab.io import import_session, read_export
from memorylab.llm import local_model
from memorylab.llm.models import complete_with_usage
from memorylab.samples import SAMPLE_DIR

SAMPLE_SPEC = SAMPLE_DIR / "experiments" / "sample.yaml"


def test_the_sample_spec_runs_offline_with_the_embedded_model(tmp_path):
    spec = yaml.safe_load(SAMPLE_SPEC.read_text(encoding="utf-8"))
    spec["cases"] = [case for case in spec["cases"] if case["name"] == "support"]
    path = tmp_path / "support.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    db, out = tmp_path / "lab.db", tmp_path / "results.json"
    result = subprocess.run([sys.executable, "-m", "memorylab", "--db", str(db), "eval", str(path), "--with-samples",
                             "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    arms = {arm["name"]: arm for arm in json.loads(out.read_text(encoding="utf-8"))["arms"]}
    assert set(arms) == {"full-history", "extractive", "embedded-summary", "window-8k", "truncate", "mask",
                         "mask+summarize"}
    assert all(arm["errors"] == 0 for arm in arms.values())
    embedded = arms["embedded-summary"]
    assert embedded["cost"] == 0.0 and embedded["tokens_after"] < embedded["tokens_before"]
    with Store(db) as store:
        run = Experiments(store).results("sample").run("embedded-summary", "support")
    assert run["model"] == "local/smollm2" and run["summary"].strip()
    assert run["usage"]["summary"]["completion_tokens"] > 0 and run["latency"] > 0


STORY_TEMPLATE = ("Here is a conversation a dragon overheard:\n{transcript}\n\nWrite a very long, detailed "
                  "story about a dragon who learns to cook. Use at least twenty paragraphs.")


def test_cancel_stops_the_embedded_model_mid_reply_and_frees_it_for_the_next_call(tmp_path):
    """A cancel is seen between the chunks of the embedded model's reply, and the abandoned reply
    leaves the model free: the next call does not wait for it to be written out."""
    spec = yaml.safe_load(SAMPLE_SPEC.read_text(encoding="utf-8"))
    spec["cases"] = [case for case in spec["cases"] if case["name"] == "support"]
    # Short prompts (a few messages each) the model reads in moments, each answered at length: a
    # reply takes tens of seconds uncancelled.
    spec["arms"] = [{"name": "story", "strategy": "summarize", "model": "local/smollm2", "protect_head": 2,
                     "tail_token_budget": 1200, "chunk_tokens": 300, "template": STORY_TEMPLATE,
                     "completion": {"temperature": 0, "max_tokens": 2000}}]
    with Store(tmp_path / "lab.db") as store:
        import_session(store, read_export(SAMPLE_DIR / "sessions" / "support_order.json"))
        job = Experiments(store).start(spec)
        generating = local_model.load_model().lock
        while not generating.locked():
            time.sleep(0.01)
        time.sleep(3.0)  # the prompt is read and the reply well under way
        cancelled = time.perf_counter()
        job.cancel()
        assert job.wait(timeout=120)
        latency = time.perf_counter() - cancelled
        assert latency < 1.5, f"cancel took {latency:.2f} s with the embedded model mid-reply"
        assert job.error is None and job.results.runs == []
    started = time.perf_counter()
    text, used = complete_with_usage("Say hello.", model="local/smollm2", max_tokens=4, temperature=0)
    assert time.perf_counter() - started < 1.5, "the next call waited for the abandoned reply"
    assert text and used["usage"]["completion_tokens"] > 0


def test_a_streamed_reply_of_the_embedded_model_is_accounted_like_a_whole_one():
    settings = {"model": "local/smollm2", "temperature": 0, "max_tokens": 8}
    streamed = complete_unless_cancelled("Say hello.", cancel=threading.Event(), **settings)
    assert streamed == complete_with_usage("Say hello.", **settings)
    assert streamed[1]["usage"]["completion_tokens"] == 8, "the provider's count, not litellm's estimate"
