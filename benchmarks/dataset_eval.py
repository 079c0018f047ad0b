#!/usr/bin/env python
"""A public benchmark as cases, end to end: import it, run its spec's model-free arms, score by category.

    python benchmarks/dataset_eval.py locomo locomo10.json --json docs/data/locomo-eval.json

Runs what a user runs (``memorylab datasets import`` then ``memorylab eval``, on a new database in a
temporary folder), times both, and writes each arm's mean probe score per question category with
the probe counts: numbers only, no text of the dataset.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def memorylab(*args):
    """Run the checkout's ``memorylab`` command; its seconds."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "memorylab", *args], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return round(time.perf_counter() - start, 2)


def by_category(results):
    """Per arm: its overall score and tokens, and its mean probe score per category (probe kind)."""
    scores = defaultdict(lambda: defaultdict(list))
    for run in results["runs"]:
        for probe in run["scores"]:
            scores[run["arm"]][probe["kind"]].append(probe["score"])
    arms = []
    for arm in results["arms"]:
        kinds = scores[arm["name"]]
        arms.append({"name": arm["name"], "strategy": arm["strategy"], "score": arm["score"],
                     "tokens_after": arm["tokens_after"], "tokens_before": arm["tokens_before"],
                     "categories": {kind: round(sum(s) / len(s), 4) for kind, s in sorted(kinds.items())}})
    probes = {kind: len(s) for kind, s in sorted(scores[arms[0]["name"]].items())} if arms else {}
    return {"arms": arms, "probes": probes}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", help="locomo or longmemeval")
    parser.add_argument("file", type=Path, help="the dataset file")
    parser.add_argument("--json", type=Path, help="write the scores here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db, spec, out = Path(folder, "bench.db"), Path(folder, "spec.yaml"), Path(folder, "eval.json")
        import_seconds = memorylab("--db", str(db), "datasets", "import", args.dataset, str(args.file.resolve()),
                                   "--spec", str(spec))
        eval_seconds = memorylab("--db", str(db), "eval", str(spec), "--json", str(out))
        header = spec.read_text(encoding="utf-8").split("\nname:")[0]
        result = by_category(json.loads(out.read_text(encoding="utf-8")))
    result |= {"dataset": args.dataset, "file": args.file.name, "import_seconds": import_seconds,
               "eval_seconds": eval_seconds, "left_out": [line.strip("# ") for line in header.splitlines()[2:]]}
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
