"""Probes nobody had to write: a case's questions drawn from the artifact ledger of its branch.

``probes: auto`` asks, of every arm, whether its context still holds what the branch stated before
the messages every arm keeps (the last ``min_tail_messages``): each file path, command, URL,
identifier, version and error becomes an ``artifact`` probe, each quantity and date a ``recall``
probe, each decision or constraint a ``decision`` probe, with the artifact's own text as the fact.
The same branch always gives the same probes, in ledger order, so two trials on the same data are
comparable; a branch rich in artifacts gives at most ``limit``, spread over the kinds in turn.
"""
from __future__ import annotations

from itertools import chain, zip_longest

from ..audit.artifacts import KINDS, extract_artifacts
from .spec import Probe

AUTO = "auto"
DEFAULT_LIMIT = 30
KEPT_TAIL = 2
"""Messages at the end of a branch that no strategy drops, so they are not asked about."""

PROBE_KIND = {"quantity": "recall", "date": "recall", "decision": "decision"}
"""The probe kind of each artifact kind; every other kind is an ``artifact`` probe."""

_QUESTIONS = {
    "path": "Which file or folder was mentioned: {text}?",
    "command": "Which command was run or proposed: {text}?",
    "url": "Which link was given: {text}?",
    "identifier": "Which identifier was mentioned: {text}?",
    "quantity": "What amount or size was stated: {text}?",
    "date": "Which date was stated: {text}?",
    "version": "Which version was named: {text}?",
    "error": "Which error occurred: {text}?",
    "decision": "What was decided or required: {text}",
}


def auto_probes(history, *, limit: int = DEFAULT_LIMIT) -> tuple[Probe, ...]:
    """The probes of ``history`` (a case's branch): one per artifact of the messages before the kept
    tail, at most ``limit``, taken from each kind in turn so one talkative kind cannot crowd out the rest."""
    candidates = [m for m in history[:max(len(history) - KEPT_TAIL, 0)] if m.get("role") != "system"]
    by_kind = {kind: [] for kind in KINDS}
    for artifact in extract_artifacts(candidates):
        by_kind[artifact.kind].append(artifact)
    interleaved = [a for a in chain.from_iterable(zip_longest(*by_kind.values())) if a is not None][:limit]
    chosen = sorted(interleaved, key=lambda a: (KINDS.index(a.kind), by_kind[a.kind].index(a)))
    counters = dict.fromkeys(KINDS, 0)
    probes = []
    for artifact in chosen:
        counters[artifact.kind] += 1
        probes.append(Probe(
            id=f"auto-{artifact.kind}-{counters[artifact.kind]}", kind=PROBE_KIND.get(artifact.kind, "artifact"),
            question=_QUESTIONS[artifact.kind].format(text=artifact.text), facts=(artifact.match,),
            answer=artifact.text))
    return tuple(probes)
