"""Scoring a compacted context against a case's probes.

Every probe is scored by matching its facts in the texts the model would see (``context_texts``):
the share of facts kept, with the missed ones named. With a grader, a model also answers the probe
from that context alone and a judge model grades the answer against the expected one; the graded
score then is the probe's score, and both prompts and raw outputs are kept with the run.
"""
from __future__ import annotations

import re

from ..messages import is_tool_part
from ..tokens import compact_json
from .cancellation import complete_unless_cancelled
from .facts import ContextText, fact_terms, match_facts

ANSWER_PROMPT = """\
Below is everything you remember of a conversation with a user. Answer the user's question from it \
alone, in one or two sentences. If it does not say, answer "I don't know".

<conversation>
{transcript}
</conversation>

Question: {question}"""

JUDGE_PROMPT = """\
You grade an assistant's answer against the expected answer.

Question: {question}
Expected answer: {expected}
Assistant's answer: {answer}

Reply with one line "SCORE: 1" when the answer states the expected facts, "SCORE: 0.5" when it states \
part of them, "SCORE: 0" when it misses them or says it does not know. Then one sentence saying why."""

_SCORE = re.compile(r"score\s*[:=]?\s*(1(?:\.0+)?|0(?:\.\d+)?|\.\d+)", re.IGNORECASE)


def context_texts(messages) -> list[str]:
    """What the model reads of each message: its text parts, tool inputs and outputs (reasoning is
    never sent back, so it is left out)."""
    texts = []
    for message in messages:
        for part in message.get("parts") or ():
            if part.get("type") == "text":
                texts.append(part.get("text") or "")
            elif is_tool_part(part):
                texts.extend(compact_json(part[key]) for key in ("input", "output") if key in part)
    return texts


def score_probes(context, probes, *, grader=None, allowed_hosts=(), cancel=None) -> tuple[list[dict], dict]:
    """``(scores, grading)``: one dict per probe (``probe``, ``kind``, ``score`` from 0 to 1, ``facts``
    with each fact's verdict, ``missed``), and the grading calls' usage and cost (empty without a grader).
    The grader's calls go only to the hosts ``allowed_api_hosts(allowed_hosts)`` allows, and stop
    (RunCancelled) once the ``threading.Event`` ``cancel`` is set."""
    text = ContextText(context_texts(context))
    text.gather(form for probe in probes for fact in probe.expected_facts() for term in fact_terms(fact)
                for form in term.pieces[0])
    scores = []
    for probe in probes:
        matches = match_facts(text, probe.expected_facts())
        kept = sum(match.kept for match in matches)
        scores.append({
            "probe": probe.id, "kind": probe.kind, "question": probe.question,
            "fact_score": kept / len(matches) if matches else 0.0,
            "facts": [match.to_dict() for match in matches],
            "missed": [match.fact for match in matches if not match.kept],
        })
    grading = _grade(context, probes, scores, grader, allowed_hosts, cancel) if grader else {}
    for score in scores:
        score["score"] = score["graded_score"] if score.get("graded_score") is not None else score["fact_score"]
    return scores, grading


def _grade(context, probes, scores, grader, allowed_hosts, cancel):
    from ..history.compaction import render_transcript
    from ..llm.api_hosts import check_spec_call

    check_spec_call(grader.models(), grader.completion, allowed_hosts)
    transcript = render_transcript(context)
    usage, cost = {}, 0.0
    for probe, score in zip(probes, scores):
        answer_prompt = ANSWER_PROMPT.format(transcript=transcript, question=probe.question)
        answer, answered = complete_unless_cancelled(answer_prompt, model=grader.answer_model, cancel=cancel,
                                                     **grader.completion)
        judge_prompt, verdict, judged = judge_answer(probe, answer, model=grader.judge_model, cancel=cancel,
                                                     completion=grader.completion)
        score.update(answer_prompt=answer_prompt, answer=answer, judge_prompt=judge_prompt, judge_output=verdict,
                     graded_score=parse_judge_score(verdict), judge_model=grader.judge_model)
        for accounted in (answered, judged):
            for key, value in accounted["usage"].items():
                usage[key] = usage.get(key, 0) + value
            cost = None if cost is None or accounted["cost"] is None else cost + accounted["cost"]
    return {"usage": usage, "cost": cost}


def judge_answer(probe, answer, *, model, completion, cancel=None) -> tuple[str, str, dict]:
    """``(prompt, verdict, usage and cost)`` of judge ``model`` grading ``answer`` to ``probe``."""
    expected = probe.answer or "; ".join(probe.facts)
    prompt = JUDGE_PROMPT.format(question=probe.question, expected=expected, answer=answer)
    verdict, judged = complete_unless_cancelled(prompt, model=model, cancel=cancel, **completion)
    return prompt, verdict, judged


def parse_judge_score(verdict) -> float | None:
    """The score a judge's reply gives (its first "SCORE: x", x from 0 to 1), or None when it gives none."""
    found = _SCORE.search(verdict or "")
    return min(float(found.group(1)), 1.0) if found else None
