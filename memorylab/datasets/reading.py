"""What every dataset reader shares: the question it hands on, and reading its JSON file."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..importers.source import loads, malformed_at, source_error


@dataclass(frozen=True)
class BenchmarkQuestion:
    """One of the dataset's questions, as its annotators wrote it; ``kind`` is its category."""

    id: str
    kind: str
    question: str
    answer: str | None
    unanswerable: bool = False
    """The dataset marks it as having no answer in the conversation (adversarial, abstention)."""


def read_json(path, expected_type, expected):
    """The JSON value of the file at ``path``, refused by name unless it is ``expected_type``."""
    try:
        data = loads(Path(path).read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise source_error(path, "", f"not valid JSON ({error})") from None
    if not isinstance(data, expected_type):
        raise source_error(path, "", f"expected {expected}, got {type(data).__name__}")
    return data


def read_entries(path, noun, shape, read_entry):
    """(sessions, questions by session id) of a dataset file holding a list of entries (LoCoMo's
    samples, LongMemEval's questions): ``read_entry(entry, where)`` gives one entry's session and
    questions; an entry of another ``shape`` is refused by its place ("sample 3")."""
    sessions, questions = [], {}
    for index, entry in enumerate(read_json(path, list, f"a list of {shape}s")):
        where = f"{noun} {index}"
        with malformed_at(path, where, shape):
            session, asked = read_entry(entry, where)
        questions[session.source_id] = asked
        sessions.append(session)
    return sessions, questions
