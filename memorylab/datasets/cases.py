"""A benchmark file into sessions and an experiment spec whose probes are the dataset's questions.

A probe's fact is the question's gold answer, matched in the context as any fact is
(``experiments.facts``), so only answers a fact matcher can judge become probes. Left out, and
counted by reason: questions the dataset marks as having no answer (LoCoMo's adversarial ones,
LongMemEval's abstentions), yes/no answers, bare counts, and answers never written in the
conversation (the matcher finds them in no message of the whole history: the annotators derived
them, from a date, an image or a chain of turns). What remains is found in the full history, so the
``full-history`` arm is the ceiling and every other arm is measured against it.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidInputError
from ..experiments.facts import ContextText, match_fact
from ..experiments.spec import Case, Probe, parse_spec
from ..importers.writer import ImportReport, write_sessions
from . import locomo, longmemeval

DATASETS = {locomo.NAME: locomo, longmemeval.NAME: longmemeval}
"""Each importable dataset by the name ``memorylab datasets import`` takes."""

ARMS = [
    {"name": "full-history", "strategy": "none"},
    {"name": "truncate", "strategy": "truncate", "keep_recent": 4, "max_text_chars": 300},
    {"name": "window-32k", "strategy": "window", "max_length": 32000},
    {"name": "window-8k", "strategy": "window", "max_length": 8000},
    {"name": "extractive", "strategy": "extractive", "protect_head": 2, "tail_token_budget": 1000},
]
"""The arms a dataset's spec runs: every strategy that needs no model, from the whole history down."""

LEFT_OUT = {
    "unanswerable": "the dataset marks them as having no answer in the conversation",
    "yes/no": "yes/no answers",
    "count": "bare counts",
    "derived": "answers never written in the conversation (derived by the annotators)",
    "no answer": "no gold answer",
}
_COUNT_WORDS = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "once",
                "twice", "thrice", "times", "time"}
_WORD = re.compile(r"[^\W_]+")


@dataclass
class DatasetImport:
    """What an import gave: the sessions written, the spec, its probes and what was left out, by reason."""

    dataset: str
    imported: ImportReport
    spec_path: Path
    probes: int
    left_out: Counter = field(default_factory=Counter)

    def __str__(self):
        lines = [str(self.imported), f"spec {self.spec_path}: {self.probes:,} probes in "
                                     f"{sum(1 for s in self.imported.sessions):,} cases"]
        lines += [f"  left out {count:,}: {LEFT_OUT[reason]}" for reason, count in self.left_out.most_common()]
        return "\n".join(lines)


def import_dataset(store, dataset, path, *, spec_path=None, tenant_id="default", agent_id=None) -> DatasetImport:
    """Write the conversations of the ``dataset`` file at ``path`` into ``store`` and the experiment spec
    that asks its questions to ``spec_path`` (default: ``<file stem>.yaml`` beside the file)."""
    if dataset not in DATASETS:
        raise InvalidInputError(f"unknown dataset {dataset!r}; choose one of: {', '.join(DATASETS)}")
    path = Path(path)
    sessions, questions = DATASETS[dataset].read(path)
    probes, left_out = {}, Counter()
    for session in sessions:
        probes[session.title] = _judgeable(session, questions[session.source_id], left_out)
    report = write_sessions(store, sessions, source=path, format_name=dataset, agent_id=agent_id or dataset,
                            tenant_id=tenant_id)
    cases = [Case(name=s.session_id, session=s.session_id, agent=s.agent_id, probes=tuple(probes[s.title]))
             for s in report.sessions if probes.get(s.title)]
    if not cases:
        raise InvalidInputError(f"{path}: none of its questions has an answer a fact matcher can judge; no spec "
                                "was written")
    spec = _spec(dataset, path, cases, left_out)
    spec_path = Path(spec_path) if spec_path else path.with_suffix(".yaml")
    spec_path.write_text(_header(dataset, path, left_out) + spec.to_yaml(), encoding="utf-8")
    return DatasetImport(dataset, report, spec_path, sum(len(c.probes) for c in cases), left_out)


def _judgeable(session, questions, left_out) -> list[Probe]:
    """The probes of the questions a fact matcher can judge; each one left out counted by reason."""
    context = ContextText([m.message["content"] for m in session.messages])
    probes = []
    for question in questions:
        reason = _left_out(question, context)
        if reason:
            left_out[reason] += 1
        else:
            probes.append(Probe(id=question.id, kind=question.kind, question=question.question,
                                facts=(question.answer,), answer=question.answer))
    return probes


def _left_out(question, context):
    if question.unanswerable:
        return "unanswerable"
    words = _WORD.findall((question.answer or "").lower())
    if not words:
        return "no answer"
    if words[0] in ("yes", "no"):
        return "yes/no"
    if all(word in _COUNT_WORDS or (word.isdigit() and len(word) < 4) for word in words):
        return "count"
    if not match_fact(context, question.answer).kept:
        return "derived"
    return None


def _spec(dataset, path, cases, left_out):
    kept = sum(len(c.probes) for c in cases)
    description = (f"The {dataset} benchmark's own questions about {path.name}, the gold answers as facts: "
                   f"{kept:,} probes; left out " + "; ".join(f"{n:,} {LEFT_OUT[r]}" for r, n in left_out.most_common())
                   + ".")
    return parse_spec({"name": f"{dataset}-{path.stem}", "description": description, "arms": ARMS,
                       "cases": [case.to_dict() for case in cases]}, source=str(path))


def _header(dataset, path, left_out):
    lines = [f"# Written by `memorylab datasets import {dataset} {path.name}`: the dataset's questions as probes.",
             "# Left out, as a fact matcher cannot judge them:"]
    lines += [f"#   {count:,} {LEFT_OUT[reason]}" for reason, count in left_out.most_common()] or ["#   none"]
    return "\n".join(lines) + "\n"
