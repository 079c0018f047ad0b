"""How far each scorer's verdicts can be trusted: their agreement with people's labels.

A scorer is the fact matcher or one judge model. On the probes people labelled (and whose label is
not stale), each scorer's verdict (pass at ``labels.PASSING_SCORE`` or more) is set against the
label: how many agree, Cohen's kappa (agreement beyond what chance would give), and the probes it
passed that people failed (false passes) and failed that people passed (false fails).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .labels import passes

if TYPE_CHECKING:
    import pandas as pd

MATCHER = "matcher"
EVERY_KIND = "all"
CALIBRATION_COLUMNS = ("scorer", "kind", "labelled", "agreed", "agreement", "kappa", "false_pass", "false_fail")


def judge_scorer(judge_model) -> str:
    return f"judge {judge_model or '(unnamed)'}"


def verdict_scorer(score) -> str:
    """The scorer whose verdict is a probe's ``score``: its judge when it was graded, else the matcher."""
    return judge_scorer(score.get("judge_model")) if score.get("graded_score") is not None else MATCHER


def cohen_kappa(pairs) -> float | None:
    """Cohen's kappa of ``(scorer passed, person passed)`` pairs: (observed agreement - chance
    agreement) / (1 - chance agreement); None when chance alone agrees on every pair (both always
    said the same one thing), where kappa is undefined."""
    pairs = list(pairs)
    if not pairs:
        return None
    observed = sum(a == b for a, b in pairs) / len(pairs)
    scorer_yes, person_yes = (sum(pair[side] for pair in pairs) / len(pairs) for side in (0, 1))
    chance = scorer_yes * person_yes + (1 - scorer_yes) * (1 - person_yes)
    return None if chance == 1 else (observed - chance) / (1 - chance)


@dataclass(frozen=True)
class Agreement:
    """One scorer against the people on one kind of probe (``kind`` "all": every kind)."""

    scorer: str
    kind: str
    labelled: int
    agreed: int
    kappa: float | None
    false_pass: tuple
    """``(case, arm, probe)`` of each probe the scorer passed and the people failed."""
    false_fail: tuple

    def text(self) -> str:
        """``matcher agrees with 46 of 50 labels, kappa 0.84``."""
        if not self.labelled:
            return f"{self.scorer}: no labels yet"
        kappa = "n/a" if self.kappa is None else f"{self.kappa:.2f}"
        return f"{self.scorer} agrees with {self.agreed} of {self.labelled} labels, kappa {kappa}"

    def to_dict(self) -> dict:
        return {"scorer": self.scorer, "kind": self.kind, "labelled": self.labelled, "agreed": self.agreed,
                "agreement": self.agreed / self.labelled if self.labelled else None, "kappa": self.kappa,
                "false_pass": [list(key) for key in self.false_pass],
                "false_fail": [list(key) for key in self.false_fail]}


def labelled_verdicts(runs, shown, grades=()) -> list[dict]:
    """One item per probe a current label judges: ``{"case", "arm", "probe", "kind", "correct",
    "verdicts": {scorer: passed}}``, from the runs' own verdicts and other judges' ``grades``."""
    others = {}
    for grade in grades:
        if grade["score"] is not None:
            key = (grade["case_name"], grade["arm"], grade["probe_id"])
            others.setdefault(key, {})[judge_scorer(grade["judge_model"])] = passes(grade["score"])
    items = []
    for run in runs:
        for score in run["scores"] if run["error"] is None else ():
            key = (run["case_name"], run["arm"], score["probe"])
            label = shown.get(key)
            if label is None or label["stale"]:
                continue
            verdicts = {MATCHER: passes(score["fact_score"])}
            if score.get("graded_score") is not None:
                verdicts[verdict_scorer(score)] = passes(score["graded_score"])
            items.append({"case": key[0], "arm": key[1], "probe": key[2], "kind": score["kind"],
                          "correct": label["correct"], "verdicts": verdicts | others.get(key, {})})
    return items


class Calibration:
    """Each scorer's agreement with people on one trial's labelled probes (``labelled_verdicts``)."""

    def __init__(self, items):
        self.items = list(items)

    def __repr__(self):
        return f"<Calibration: {len(self.items)} labelled probes, scorers {', '.join(self.scorers)}>"

    @property
    def scorers(self) -> list[str]:
        return sorted({scorer for item in self.items for scorer in item["verdicts"]},
                      key=lambda scorer: (scorer != MATCHER, scorer))

    @property
    def kinds(self) -> list[str]:
        return list(dict.fromkeys(item["kind"] for item in self.items))

    def agreement(self, scorer, *, kind=EVERY_KIND, arm=None) -> Agreement:
        """``scorer`` against the people on the labelled probes of ``kind`` (and of ``arm`` when given)."""
        judged = [item for item in self.items if scorer in item["verdicts"]
                  and kind in (EVERY_KIND, item["kind"]) and arm in (None, item["arm"])]
        pairs = [(item["verdicts"][scorer], item["correct"]) for item in judged]
        keys = [(item["case"], item["arm"], item["probe"]) for item in judged]
        return Agreement(scorer, kind, len(pairs), sum(a == b for a, b in pairs), cohen_kappa(pairs),
                         tuple(k for k, (said, truth) in zip(keys, pairs) if said and not truth),
                         tuple(k for k, (said, truth) in zip(keys, pairs) if truth and not said))

    def agreements(self) -> list[Agreement]:
        """Per scorer, every kind together and then each kind."""
        return [self.agreement(scorer, kind=kind) for scorer in self.scorers for kind in (EVERY_KIND, *self.kinds)]

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        rows = [a.to_dict() | {"false_pass": len(a.false_pass), "false_fail": len(a.false_fail)}
                for a in self.agreements()]
        return pd.DataFrame(rows, columns=CALIBRATION_COLUMNS)

    def to_dict(self) -> dict:
        return {"labelled": len(self.items), "scorers": [a.to_dict() for a in self.agreements()]}

    def summary_lines(self) -> list[str]:
        """One line per scorer over every kind: ``matcher agrees with 46 of 50 labels, kappa 0.84``."""
        return [self.agreement(scorer).text() for scorer in self.scorers]
