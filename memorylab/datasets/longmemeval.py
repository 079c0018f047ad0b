"""LongMemEval (xiaowu0162/LongMemEval, ``longmemeval_s`` / ``longmemeval_m`` / ``longmemeval_oracle``):
500 questions, each asked after its own haystack of dated user-assistant sessions.

Each question becomes one session holding its haystack's sessions in order, each message keeping
its haystack session's id and date and whether the dataset marks it as holding the answer
(``has_answer``). A question whose id ends in ``_abs`` is an abstention question: the haystack does
not hold its answer.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ..importers.source import SourceMessage, SourceSession
from .reading import BenchmarkQuestion, read_entries

NAME = "longmemeval"


def read(path):
    """(sessions, questions by session id) of the LongMemEval file at ``path``."""
    return read_entries(path, "question", "LongMemEval question (question_id, question, answer, haystack_sessions)",
                        lambda entry, where: (_session(entry, where), [_question(entry)]))


def _session(entry, where):
    question_id = entry["question_id"]
    ids, dates = entry.get("haystack_session_ids") or [], entry.get("haystack_dates") or []
    messages = []
    for number, turns in enumerate(entry["haystack_sessions"]):
        haystack_id = ids[number] if number < len(ids) else str(number)
        date = dates[number] if number < len(dates) else None
        start = _parse_date(date)
        for offset, turn in enumerate(turns):
            metadata = {"haystack_session": haystack_id, "session_date": date}
            if turn.get("has_answer"):
                metadata["has_answer"] = True
            message = {"id": f"{question_id}:{number}:{offset}", "role": turn["role"], "content": turn["content"],
                       "metadata": metadata}
            if start:
                message["created_at"] = (start + timedelta(seconds=offset)).isoformat()
            messages.append(SourceMessage(message, where=f"{where}, haystack session {number}, turn {offset}"))
    return SourceSession(source_id=f"longmemeval-{question_id}", messages=messages, opening_span=0,
                         title=f"LongMemEval {question_id}: {entry['question']}"[:200],
                         metadata={"dataset": NAME, "question_id": question_id,
                                   "question_date": entry.get("question_date")})


def _parse_date(text):
    """"2023/05/20 (Sat) 02:21" as a UTC time (the dataset gives no zone); None if it reads otherwise."""
    try:
        return datetime.strptime(text or "", "%Y/%m/%d (%a) %H:%M").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def _question(entry):
    answer = entry.get("answer")
    return BenchmarkQuestion(id="q1", kind=entry["question_type"], question=entry["question"],
                             answer=None if answer is None else str(answer),
                             unanswerable=str(entry["question_id"]).endswith("_abs"))
