"""The sample experiment offline: every arm of sample_data/experiments/sample.yaml, the embedded
model's summarize arm included, through ``memorylab eval`` in a fresh process, on the support case
(the one short enough for the embedded model to summarize in one request)."""
import json
import subprocess
import sys

import yaml

from memorylab import Store
from memorylab.experiments import Experiments
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
