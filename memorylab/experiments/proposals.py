"""Probes proposed by a model from the span a compaction drops, for a person to review before use.

The model is asked for a JSON list; whatever it answers is read leniently (the first JSON list in
the reply), and each proposal passes the same checks as a probe written by hand. Nothing is saved.
"""
from __future__ import annotations

import json
import re

from ..errors import ModelOutputError
from ..history.compaction import render_transcript
from .spec import PROBE_KINDS, _probe, _Problems

PROPOSAL_PROMPT = """\
The messages below are about to be summarized away from an AI assistant's memory. Write {count} \
questions the user might ask later whose answers are in these messages, so we can test whether a \
summary keeps them. Mix the kinds: recall (a stated fact: a number, a name, a date), artifact (a file, \
table, id or command that was created or changed), continuation (what is still to do), decision (what \
was decided and why).

<messages>
{transcript}
</messages>

Reply with a JSON list only, one object per question:
[{{"kind": "recall", "question": "...", "facts": ["a short exact phrase from the messages"], \
"answer": "one sentence"}}]"""

_LIST = re.compile(r"\[.*\]", re.DOTALL)


def propose_probes(messages, *, model=None, count=6, **completion) -> list:
    """Up to ``count`` probes about ``messages`` (e.g. ``plan.middle``), proposed by ``model``
    (default: the embedded one). ModelOutputError when the reply holds no usable probe."""
    from ..llm.models import DEFAULT_LOCAL_MODEL, complete_text

    prompt = PROPOSAL_PROMPT.format(count=count, transcript=render_transcript(messages))
    reply = complete_text(prompt, model=model or DEFAULT_LOCAL_MODEL, **completion)
    return read_proposals(reply)[:count]


def read_proposals(reply) -> list:
    """The probes in a model's reply; proposals that fail a probe's checks are left out."""
    found = _LIST.search(reply or "")
    try:
        items = json.loads(found.group(0)) if found else None
    except ValueError:
        items = None
    if not isinstance(items, list):
        raise ModelOutputError(f"the model's reply held no JSON list of probes: {(reply or '')[:200]!r}")
    probes = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        item = {key: item[key] for key in ("kind", "question", "facts", "answer") if key in item}
        if item.get("kind") not in PROBE_KINDS:
            item["kind"] = "recall"
        problems = _Problems("a proposed probe")
        probe = _probe({"id": f"proposed-{index + 1}", **item}, "", problems)
        if not problems.found:
            probes.append(probe)
    if not probes:
        raise ModelOutputError(f"none of the model's proposals was a usable probe: {(reply or '')[:200]!r}")
    return probes
