"""LoCoMo (snap-research/locomo, ``data/locomo10.json``): ten long conversations between two people,
each with the questions its annotators wrote about it.

Each sample becomes one session: its dated sessions in order, speaker A as ``user`` and speaker B as
``assistant``, each turn keeping its speaker's name, its turn id (``D1:3``), its session's number and
date, and, for a shared image, the caption the dataset gives it (in the text, as the benchmark shows
it to a model) and its URL.
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from ..importers.source import SourceMessage, SourceSession
from .reading import BenchmarkQuestion, read_entries

NAME = "locomo"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
"""The QA categories of the release, as the LoCoMo paper names them; 5 has no answer to find."""
_SESSION = re.compile(r"session_(\d+)")


def read(path):
    """(sessions, questions by session id) of the LoCoMo file at ``path``."""
    return read_entries(path, "sample", "LoCoMo sample (sample_id, conversation, qa)", _entry)


def _entry(sample, where):
    return _session(sample, where), [_question(qa, number) for number, qa in enumerate(sample["qa"], 1)]


def _session(sample, where):
    conversation = sample["conversation"]
    roles = {conversation["speaker_a"]: "user", conversation["speaker_b"]: "assistant"}
    numbers = sorted(int(m[1]) for key in conversation if (m := _SESSION.fullmatch(key)))
    messages = []
    for number in numbers:
        date = conversation.get(f"session_{number}_date_time")
        start = _parse_date(date)
        for offset, turn in enumerate(conversation[f"session_{number}"]):
            messages.append(_message(sample["sample_id"], turn, roles, number, date, start, offset, where))
    session_id = f"locomo-{sample['sample_id']}"
    title = f"LoCoMo {sample['sample_id']}: {conversation['speaker_a']} and {conversation['speaker_b']}"
    return SourceSession(source_id=session_id, messages=messages, title=title, opening_span=0,
                         metadata={"dataset": NAME, "sample_id": sample["sample_id"],
                                   "speakers": {"user": conversation["speaker_a"],
                                                "assistant": conversation["speaker_b"]}})


def _message(sample_id, turn, roles, number, date, start, offset, where):
    text = turn["text"]
    metadata = {"speaker": turn["speaker"], "dia_id": turn["dia_id"], "session": number, "session_date": date}
    if turn.get("blip_caption"):
        text += f"\n[{turn['speaker']} shares an image: {turn['blip_caption']}]"
        metadata["image_url"] = turn.get("img_url")
    message = {"id": f"{sample_id}:{turn['dia_id']}", "role": roles.get(turn["speaker"], "user"), "content": text,
               "metadata": metadata}
    if start:
        message["created_at"] = (start + timedelta(seconds=offset)).isoformat()
    return SourceMessage(message, where=f"{where}, {turn['dia_id']}")


def _parse_date(text):
    """"1:56 pm on 8 May, 2023" as a UTC time (the dataset gives no zone); None if it reads otherwise."""
    try:
        return datetime.strptime(text or "", "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def _question(qa, number):
    category = CATEGORIES.get(qa.get("category"), str(qa.get("category")))
    answer = qa.get("answer")
    return BenchmarkQuestion(id=f"q{number}", kind=category, question=qa["question"],
                             answer=None if answer is None else str(answer), unanswerable=category == "adversarial")
