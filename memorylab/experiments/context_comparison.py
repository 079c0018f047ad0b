"""Two compacted contexts compared message by message, every part in full: which messages both hold
as they are, which one changed (with a unified diff of its text), which only one holds, and the tokens
of each. ``identical`` only when the model would be sent the same messages."""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..tokens import estimate_message_tokens

if TYPE_CHECKING:
    import pandas as pd

SAME, CHANGED, ONLY_FIRST, ONLY_SECOND = "same", "changed", "only in the first", "only in the second"


def message_text(message) -> str:
    """All a message says, every part in full: a text part as written, any other part as its JSON."""
    return "\n".join(part.get("text") or "" if part.get("type") == "text"
                     else json.dumps(part, ensure_ascii=False, sort_keys=True, indent=1)
                     for part in message.get("parts") or ())


def message_tokens(message) -> int:
    return message.get("tokens") or estimate_message_tokens([message])


@dataclass(frozen=True)
class MessageChange:
    """One row of a comparison: the message numbered ``first`` in the first context (from 1; None
    when only the second holds it) and ``second`` in the second, and the diff of their texts when ``changed``."""

    status: str
    first: int | None
    second: int | None
    role: str
    first_tokens: int | None
    second_tokens: int | None
    diff: str = ""


@dataclass(frozen=True)
class ContextComparison:
    first_name: str
    second_name: str
    changes: tuple
    first_tokens: int
    second_tokens: int

    @property
    def identical(self) -> bool:
        return all(change.status == SAME for change in self.changes)

    def counts(self) -> dict[str, int]:
        """How many messages are in each status (every status named, 0 included)."""
        return {status: sum(change.status == status for change in self.changes)
                for status in (SAME, CHANGED, ONLY_FIRST, ONLY_SECOND)}

    def summary(self) -> str:
        """One sentence: ``identical`` with the shared size, else what differs and the tokens of each."""
        size = f"{len(self.changes):,} messages, {self.first_tokens:,} tokens"
        if self.identical:
            return f"The two contexts are identical: {size}."
        counts = self.counts()
        return (f"The contexts differ: {counts[SAME]:,} messages the same, {counts[CHANGED]:,} changed, "
                f"{counts[ONLY_FIRST]:,} only in {self.first_name}, {counts[ONLY_SECOND]:,} only in "
                f"{self.second_name}; {self.first_tokens:,} tokens against {self.second_tokens:,}.")

    def frame(self) -> pd.DataFrame:
        """One row per message of either context, in context order, without the diffs."""
        import pandas as pd

        columns = ("status", "first", "second", "role", "first_tokens", "second_tokens")
        return pd.DataFrame([{column: getattr(change, column) for column in columns} for change in self.changes],
                            columns=columns)

    def diff_text(self) -> str:
        """The unified diff of every changed message, one after the other ("" when none changed)."""
        return "\n".join(change.diff for change in self.changes if change.status == CHANGED)


def compare_contexts(first, second, first_name="first", second_name="second") -> ContextComparison:
    """``first`` against ``second`` (lists of messages). Runs of messages both hold unchanged are
    found as a diff finds lines; in between, a message of the same id on both sides (or, where no id
    matches, the one at the same place in two runs of equal length) is "changed", the rest is in
    one context only."""
    texts = [[(m.get("role"), message_text(m)) for m in context] for context in (first, second)]
    matcher = difflib.SequenceMatcher(None, *texts, autojunk=False)
    changes = []
    for tag, a_start, a_end, b_start, b_end in matcher.get_opcodes():
        if tag == "equal":
            changes += [_row(SAME, first, a, second, b) for a, b in zip(range(a_start, a_end), range(b_start, b_end))]
        else:
            changes += _unmatched(first, range(a_start, a_end), second, range(b_start, b_end),
                                  texts, (first_name, second_name))
    return ContextComparison(first_name, second_name, tuple(changes), sum(map(message_tokens, first)),
                             sum(map(message_tokens, second)))


def _unmatched(first, a_range, second, b_range, texts, names):
    """The rows of a stretch the two contexts do not share, in the order of the first, then the second."""
    b_by_id = {second[b]["id"]: b for b in b_range if second[b].get("id") is not None}
    pairs = {a: b_by_id[first[a].get("id")] for a in a_range if first[a].get("id") in b_by_id}
    if not pairs and len(a_range) == len(b_range):
        pairs = dict(zip(a_range, b_range))
    rows, paired = [], set(pairs.values())
    for a in a_range:
        if a in pairs:
            rows.append(_row(CHANGED, first, a, second, pairs[a], _diff(texts, a, pairs[a], names)))
        else:
            rows.append(_row(ONLY_FIRST, first, a, second, None))
    return rows + [_row(ONLY_SECOND, first, None, second, b) for b in b_range if b not in paired]


def _row(status, first, a, second, b, diff=""):
    message = first[a] if a is not None else second[b]
    numbers = (None if a is None else a + 1, None if b is None else b + 1)
    tokens = (None if a is None else message_tokens(first[a]), None if b is None else message_tokens(second[b]))
    return MessageChange(status, *numbers, message.get("role") or "", *tokens, diff)


def _diff(texts, a, b, names):
    (role_a, text_a), (role_b, text_b) = texts[0][a], texts[1][b]
    lines = difflib.unified_diff(text_a.splitlines(), text_b.splitlines(), f"{names[0]} message {a + 1} ({role_a})",
                                 f"{names[1]} message {b + 1} ({role_b})", lineterm="")
    return "\n".join(lines) or f"--- {names[0]} message {a + 1} ({role_a})\n+++ {names[1]} message {b + 1} " \
                               f"({role_b})\n(the same text; the role differs)"
