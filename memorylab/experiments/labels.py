"""People's labels on probe verdicts, matched to the outputs they judge.

A label says whether an arm's output truly keeps what a probe asks (``correct``: the probe should
pass), and for a graded probe may carry the person's own 0-1 grade of the answer. It is keyed by the
output it judges (``output_digest``: the context the arm left, and the answer for a graded probe),
not by the run, so a re-run of the same spec that leaves the same output shows the label again, and
one that leaves another output shows the newest label on that probe as stale (kept, not counted).
"""
from __future__ import annotations

import hashlib
import json

PASSING_SCORE = 0.5
"""A verdict passes a probe at this score or more (half the facts kept; a judge's "part of them")."""


def passes(score) -> bool | None:
    """Whether a verdict's score passes its probe (None when it gave none)."""
    return None if score is None else score >= PASSING_SCORE


def output_digest(context, score) -> str:
    """What a label on ``score`` (one probe's verdict on a run) judges: the run's stored context, and
    the answer a grader's model gave, when the probe was graded."""
    return _digest(_canonical_json(context), score)


def probe_outputs(runs) -> dict[tuple, str]:
    """``(case, arm, probe)`` to its output's digest, for ``runs`` read with their context (each
    context written out once, however many probes its run has)."""
    outputs = {}
    for run in runs:
        if run["error"] is None:
            context = _canonical_json(run["context"])
            for score in run["scores"]:
                outputs[(run["case_name"], run["arm"], score["probe"])] = _digest(context, score)
    return outputs


def _canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _digest(context_json, score) -> str:
    """The digest of ``{"answer", "context"}`` as ``_canonical_json`` writes it (keys sorted), the
    context already written."""
    text = f'{{"answer":{_canonical_json(score.get("answer"))},"context":{context_json}}}'
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def trial_labels(outputs, labels) -> dict[tuple, dict]:
    """``(case, arm, probe)`` to the label shown on it: the one given on its output, else the newest
    one given on another output, marked ``stale``. ``labels`` newest first, as the store reads them."""
    shown = {}
    for label in labels:
        key = (label["case_name"], label["arm"], label["probe_id"])
        if key not in outputs:
            continue
        if label["output"] == outputs[key]:
            shown[key] = label | {"stale": False}
        else:
            shown.setdefault(key, label | {"stale": True})
    return shown
