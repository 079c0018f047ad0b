"""One trial's runs read back: the leaderboard, per-run and per-probe tables, exports and comparisons.

A run that failed scores 0 in its arm's mean (it kept nothing the model could use) and is counted
in the arm's ``errors``, so a regression check never passes on an arm that did not run. Each mean
comes with its 95% bootstrap interval over cases, and arms and trials are compared case by case
(``intervals``): the same runs give the same intervals every time.
"""
from __future__ import annotations

import json
import math
import statistics
from typing import TYPE_CHECKING

from ..errors import NotFoundError
from .intervals import Comparison, bounds, mean, mean_interval, paired_difference

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects

RUN_COLUMNS = ("arm", "strategy", "case", "score", "tokens_before", "tokens_after", "tokens_saved", "saved_pct",
               "summary_tokens", "cost", "latency_s", "model", "error")
LEADERBOARD_COLUMNS = ("arm", "strategy", "score", "score_low", "score_high", "vs_best", "spread", "min_case",
                       "max_case", "tokens_before", "tokens_after", "saved_pct", "summary_tokens", "cost", "latency_s",
                       "errors", "min_score", "passed", "trust")


class ExperimentResults:
    """The runs of one trial of an experiment (``runs`` as ``store.experiments.runs`` reads them),
    with each arm's threshold (``thresholds``: arm name to min score or None), the people's labels
    shown on its probes (``labels``: ``(case, arm, probe)`` to a label, ``labels.trial_labels``) and
    its scorers' ``calibration`` against them (None: no labels)."""

    def __init__(self, experiment, trial, runs, *, thresholds=None, expected_runs=None, labels=None,
                 calibration=None):
        self.experiment = experiment
        self.trial = trial
        self.runs = runs
        self.thresholds = thresholds or {}
        self.expected_runs = expected_runs
        self.labels = labels or {}
        self.calibration = calibration

    def __repr__(self):
        return f"<ExperimentResults {self.experiment!r} trial {self.trial}: {len(self.runs)} runs>"

    @property
    def complete(self) -> bool:
        """False when the trial was cancelled or interrupted before every run was stored."""
        return self.expected_runs is None or len(self.runs) >= self.expected_runs

    @property
    def arms(self) -> list[str]:
        return list(dict.fromkeys(run["arm"] for run in self.runs))

    @property
    def cases(self) -> list[str]:
        return list(dict.fromkeys(run["case_name"] for run in self.runs))

    def run(self, arm, case) -> dict | None:
        return next((r for r in self.runs if r["arm"] == arm and r["case_name"] == case), None)

    def case_scores(self, arm) -> dict[str, float]:
        """``arm``'s score on each case it ran (a failed run's is 0): what its mean and interval are of."""
        return {run["case_name"]: _case_score(run) for run in self.runs if run["arm"] == arm}

    def compare_arms(self, first, second) -> Comparison:
        """``first`` against ``second`` on the cases both ran: the difference of their means (first
        minus second), its 95% bootstrap interval and "better", "worse" or "no clear difference"."""
        for arm in (first, second):
            if arm not in self.arms:
                raise NotFoundError(f"no arm {arm!r} in trial {self.trial} of {self.experiment!r}; its arms: "
                                    f"{', '.join(self.arms)}")
        return paired_difference(self.case_scores(first), self.case_scores(second))

    # -- tables --------------------------------------------------------------------------------------

    def runs_frame(self) -> pd.DataFrame:
        """One row per run (arm on case)."""
        import pandas as pd

        rows = []
        for run in self.runs:
            saved = run["tokens_before"] - run["tokens_after"] if run["error"] is None else None
            rows.append({
                "arm": run["arm"], "strategy": run["strategy"], "case": run["case_name"], "score": run["score"],
                "tokens_before": run["tokens_before"], "tokens_after": run["tokens_after"], "tokens_saved": saved,
                "saved_pct": _percent(saved, run["tokens_before"]), "summary_tokens": run["summary_tokens"],
                "cost": run["cost"], "latency_s": round(run["latency"], 3), "model": run["model"],
                "error": run["error"],
            })
        return pd.DataFrame(rows, columns=RUN_COLUMNS)

    def probes_frame(self) -> pd.DataFrame:
        """One row per probe of each run: its score and the facts the context missed."""
        import pandas as pd

        rows = [
            {"arm": run["arm"], "case": run["case_name"], "probe": s["probe"], "kind": s["kind"], "score": s["score"],
             "fact_score": s["fact_score"], "graded_score": s.get("graded_score"), "missed": ", ".join(s["missed"]),
             "question": s["question"]}
            for run in self.runs for s in run["scores"]
        ]
        return pd.DataFrame(rows, columns=("arm", "case", "probe", "kind", "score", "fact_score", "graded_score",
                                           "missed", "question"))

    def arm_summaries(self) -> list[dict]:
        """Per arm, in the experiment's order: mean score over cases (failed runs count 0), its 95%
        interval (``score_low`` to ``score_high``; None with one case), its verdict against the best
        arm (``vs_best``; None for the best), its spread (population standard deviation), mean
        tokens, total cost, and whether it reached its threshold."""
        summaries = []
        for arm in self.arms:
            runs = [r for r in self.runs if r["arm"] == arm]
            scores = list(self.case_scores(arm).values())
            ok = [r for r in runs if r["error"] is None]
            costs = [r["cost"] for r in ok]
            score, (low, high) = mean(scores), bounds(mean_interval(scores))
            threshold = self.thresholds.get(arm)
            before, after = mean([r["tokens_before"] for r in ok]), mean([r["tokens_after"] for r in ok])
            summaries.append({
                "arm": arm, "strategy": runs[0]["strategy"], "score": score,
                "score_low": low, "score_high": high, "vs_best": None,
                "spread": statistics.pstdev(scores) if len(scores) > 1 else 0.0,
                "min_case": min(scores), "max_case": max(scores),
                "tokens_before": None if before is None else round(before),
                "tokens_after": None if after is None else round(after),
                "saved_pct": _percent(None if before is None else before - after, before),
                "summary_tokens": round(mean([r["summary_tokens"] for r in ok]) or 0),
                "cost": None if any(c is None for c in costs) else sum(costs),
                "latency_s": round(mean([r["latency"] for r in runs]), 3),
                "errors": len(runs) - len(ok), "min_score": threshold,
                "passed": None if threshold is None else score >= threshold, "trust": self.trust(arm),
            })
        return self._against_best(summaries)

    def trust(self, arm) -> str:
        """How far ``arm``'s score can be trusted: the people's labels on its probes against the scorer
        whose verdicts make its score (``matcher agrees with 9 of 10 labels, kappa 0.78``)."""
        from .calibration import MATCHER, verdict_scorer

        scores = [s for r in self.runs if r["arm"] == arm and r["error"] is None for s in r["scores"]]
        scorer = verdict_scorer(scores[0]) if scores else MATCHER
        if self.calibration is None:
            return f"{scorer}: no labels yet"
        return self.calibration.agreement(scorer, arm=arm).text()

    def _against_best(self, summaries):
        """Each summary's ``vs_best``: its arm compared case by case with the leaderboard's first."""
        if summaries:
            best = min(summaries, key=_rank)["arm"]
            for summary in summaries:
                if summary["arm"] != best:
                    summary["vs_best"] = self.compare_arms(summary["arm"], best).verdict
        return summaries

    def leaderboard(self) -> pd.DataFrame:
        """``arm_summaries`` as a table, best score first (ties: fewer tokens after)."""
        import pandas as pd

        summaries = sorted(self.arm_summaries(), key=_rank)
        return pd.DataFrame(summaries, columns=LEADERBOARD_COLUMNS)

    def failing_arms(self, min_score=None) -> list[dict]:
        """The arms under their threshold (``min_score`` overrides every arm's)."""
        failing = []
        for summary in self.arm_summaries():
            threshold = min_score if min_score is not None else summary["min_score"]
            if threshold is not None and summary["score"] < threshold:
                failing.append(summary | {"min_score": threshold})
        return failing

    def missed_probes(self, arm) -> pd.DataFrame:
        """The probes ``arm`` did not fully keep, on every case."""
        probes = self.probes_frame()
        return probes[(probes["arm"] == arm) & (probes["score"] < 1)].reset_index(drop=True)

    def retention(self) -> list[dict]:
        """The decay arms' retention curves: per arm and round, the early probes' mean score (``decay``)."""
        from .decay import retention_curve

        return retention_curve(self.runs)

    def decay_figure(self, **layout) -> "plotly.graph_objects.Figure":
        from ..display.viz import decay_figure

        return decay_figure(self.retention(), **layout)

    # -- exports -------------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """``{"experiment", "trial", "complete", "arms": [...], "runs": [...], "retention": [...], "labels": [...],
        "calibration": {...} or None}``; each arm holds at least ``name``, ``strategy``, ``score`` (0 to
        1), ``tokens_before``, ``tokens_after``, ``cost`` and ``trust``; ``retention`` is ``retention()``
        (empty without a decay arm); each label holds its ``case_name``, ``arm``, ``probe_id``,
        ``correct``, ``grade``, ``labelled_by``, ``labelled_at`` and ``stale``."""
        arms = [{"name": s.pop("arm"), **s} for s in self.arm_summaries()]
        runs = [{key: value for key, value in run.items() if key != "context"} for run in self.runs]
        return {"experiment": self.experiment, "trial": self.trial, "complete": self.complete, "arms": arms,
                "runs": runs, "retention": self.retention(), "labels": list(self.labels.values()),
                "calibration": None if self.calibration is None else self.calibration.to_dict()}

    def to_json(self, path=None, *, indent=2) -> str:
        text = json.dumps(self.to_dict(), ensure_ascii=False, indent=indent, default=str)
        if path is not None:
            with open(path, "w", encoding="utf-8") as file:
                file.write(text + "\n")
        return text

    def to_csv(self, path=None) -> str | None:
        """The runs table as CSV (written to ``path`` when given)."""
        return self.runs_frame().to_csv(path, index=False)

    def leaderboard_csv(self, path=None) -> str | None:
        """The leaderboard, with each mean's interval and verdict against the best, as CSV."""
        return self.leaderboard().to_csv(path, index=False)

    def leaderboard_markdown(self) -> str:
        """The leaderboard as a Markdown table (what the README and ``memorylab eval`` show)."""
        lines = ["| arm | strategy | score | 95% interval | against the best | spread | tokens before | tokens after "
                 "| saved | cost | errors |",
                 "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
        for row in self.leaderboard().to_dict("records"):
            cost = "n/a" if _missing(row["cost"]) else f"{row['cost']:.4f}"
            lines.append(f"| {row['arm']} | {row['strategy']} | {row['score']:.2f} | {interval_text(row)} | "
                         f"{against_best_text(row)} | {row['spread']:.2f} | "
                         f"{_count(row['tokens_before'])} | {_count(row['tokens_after'])} | "
                         f"{percent_text(row['saved_pct'])} | {cost} | {row['errors']} |")
        return "\n".join(lines)

    def pareto_figure(self, **layout) -> "plotly.graph_objects.Figure":
        from ..display.viz import pareto_figure

        return pareto_figure(self.arm_summaries(), **layout)

    def _repr_html_(self):
        from ..display.notebook import results_html

        return results_html(self)


def compare_trials(first, second) -> pd.DataFrame:
    """Each arm on each case in two trials (``ExperimentResults``) side by side, with the change in
    score and in tokens after. Arms or cases only one trial has show with the other side empty.

    Each row also holds its arm's change over the cases both trials ran (``arm_cases``; failed runs
    count 0, as in the means): ``arm_change`` (second minus first), its 95% interval
    (``arm_change_low`` to ``arm_change_high``) and ``arm_verdict``, the second trial's arm being
    "better", "worse" or "no clear difference"."""
    import pandas as pd

    rows = []
    keys = list(dict.fromkeys((r["arm"], r["case_name"]) for r in [*first.runs, *second.runs]))
    changes = {arm: paired_difference(second.case_scores(arm), first.case_scores(arm)) for arm, _ in keys}
    for arm, case in keys:
        change = changes[arm]
        a, b = first.run(arm, case), second.run(arm, case)
        score_a, score_b = (run["score"] if run else None for run in (a, b))
        rows.append({
            "arm": arm, "case": case, f"score_{first.trial}": score_a, f"score_{second.trial}": score_b,
            "score_change": None if score_a is None or score_b is None else score_b - score_a,
            f"tokens_after_{first.trial}": a["tokens_after"] if a else None,
            f"tokens_after_{second.trial}": b["tokens_after"] if b else None,
            "settings_changed": bool(a and b
                                     and (a["strategy"], a["arm_settings"]) != (b["strategy"], b["arm_settings"])),
            "arm_cases": change.cases, "arm_change": change.difference,
            **dict(zip(("arm_change_low", "arm_change_high"), bounds(change.interval))), "arm_verdict": change.verdict,
        })
    return pd.DataFrame(rows)


def interval_text(summary) -> str:
    """An arm's 95% interval (a summary or a leaderboard row) as ``0.74–0.90``; ``n/a`` with one case."""
    low, high = summary["score_low"], summary["score_high"]
    return "n/a" if _missing(low) or _missing(high) else f"{low:.2f}–{high:.2f}"


def score_text(summary) -> str:
    """An arm's mean with its interval: ``0.82 (0.74–0.90)``."""
    return f"{summary['score']:.2f} ({interval_text(summary)})"


def against_best_text(summary) -> str:
    """An arm's verdict against the best arm; ``(the best)`` for the best itself."""
    return "(the best)" if _missing(summary["vs_best"]) else summary["vs_best"]


def _case_score(run):
    return run["score"] if run["error"] is None and run["score"] is not None else 0.0


def _rank(summary):
    """The leaderboard's order: best score first; ties, fewer tokens after (an arm with none last)."""
    return -summary["score"], summary["tokens_after"] is None, summary["tokens_after"] or 0


def _percent(part, whole):
    return None if part is None or not whole else round(100 * part / whole, 1)


def _missing(value):
    """None, or the NaN a DataFrame puts in an empty number cell."""
    return value is None or isinstance(value, float) and math.isnan(value)


def _count(value):
    return "" if _missing(value) else f"{int(value):,}"


def whole_percent(value) -> int | None:
    """A percentage rounded to a whole number, halves away from zero (26.5 is 27, -0.5 is -1): the one
    rule every headline and table of saved tokens uses, so they never disagree by one."""
    return None if _missing(value) else int(math.copysign(math.floor(abs(value) + 0.5), value))


def percent_text(value) -> str:
    """``whole_percent`` as text, ``27%`` ("" for none)."""
    return "" if _missing(value) else f"{whole_percent(value)}%"
