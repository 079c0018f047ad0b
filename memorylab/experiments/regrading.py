"""Re-grading a finished trial with another judge model: the answers its grader's model gave are
judged again, nothing is summarized or answered anew, so what moves is the judge alone."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InvalidInputError
from ..messages import utc_now_iso
from .scoring import judge_answer, parse_judge_score

if TYPE_CHECKING:
    import pandas as pd

REGRADE_COLUMNS = ("arm", "case", "probe", "kind", "score", "regraded", "change")


def regrade_runs(runs, spec, trial, judge_model, *, completion=None, allowed_hosts=(), cancel=None) -> list[dict]:
    """Judge ``model``'s verdict on every graded probe of ``runs``, as ``store.experiments.save_grades``
    takes them. InvalidInputError when no run holds a graded answer (the trial ran without a grader)."""
    from ..llm.api_hosts import check_spec_call

    completion = dict(completion or {})
    check_spec_call({"judge_model": judge_model}, completion, allowed_hosts)
    answered = [(run, score) for run in runs if run["error"] is None for score in run["scores"]
                if score.get("answer") is not None]
    if not answered:
        raise InvalidInputError(f"trial {trial} of {spec.name!r} holds no graded answers to judge again: give "
                                "the spec a grader (answer_model and judge_model) and run it")
    grades = []
    for run, score in answered:
        probe = next(p for p in spec.case(run["case_name"]).probes if p.id == score["probe"])
        _, verdict, _ = judge_answer(probe, score["answer"], model=judge_model, completion=completion, cancel=cancel)
        grades.append({"trial": trial, "arm": run["arm"], "case_name": run["case_name"], "probe_id": score["probe"],
                       "judge_model": judge_model, "score": parse_judge_score(verdict), "judge_output": verdict,
                       "graded_at": utc_now_iso()})
    return grades


@dataclass(frozen=True)
class Regrading:
    """A trial's graded probes under their own judge and under ``judge_model``: how far the scores move."""

    judge_model: str
    rows: tuple
    """``{"arm", "case", "probe", "kind", "score", "regraded", "change"}`` per graded probe."""

    @classmethod
    def of(cls, runs, grades, judge_model) -> Regrading:
        new = {(g["arm"], g["case_name"], g["probe_id"]): g["score"] for g in grades if g["judge_model"] == judge_model}
        rows = []
        for run in runs:
            for score in run["scores"] if run["error"] is None else ():
                key = (run["arm"], run["case_name"], score["probe"])
                if key in new:
                    old, regraded = score.get("graded_score"), new[key]
                    rows.append({"arm": key[0], "case": key[1], "probe": key[2], "kind": score["kind"], "score": old,
                                 "regraded": regraded,
                                 "change": None if old is None or regraded is None else regraded - old})
        return cls(judge_model, tuple(rows))

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(list(self.rows), columns=REGRADE_COLUMNS)

    def arm_changes(self) -> pd.DataFrame:
        """Per arm: graded probes, their mean score under each judge, the change, and verdicts that moved."""
        frame = self.frame()
        grouped = frame.groupby("arm", sort=False)
        return grouped.agg(probes=("probe", "size"), score=("score", "mean"), regraded=("regraded", "mean"),
                           moved=("change", lambda c: int((c.fillna(0) != 0).sum()))).assign(
            change=lambda f: f["regraded"] - f["score"]).reset_index()

    def mean_change(self) -> float | None:
        changes = [row["change"] for row in self.rows if row["change"] is not None]
        return sum(changes) / len(changes) if changes else None
