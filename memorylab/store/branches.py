"""Where a session's messages lie, and the reads that use it: branches as stretches, pages, outlines.

Messages are rows numbered by ``seq`` in the order they were written, and a child is always written
after its parent; a row's ``continues`` flag says that its parent is the row written just before it in
its session (``schema.MESSAGES``). A branch is then a few stretches of consecutive rows, each one range
of ``seq``: ``BranchReads`` reads a branch, a page of one, or an outline of the whole session by those
ranges, and falls back to a walk up the parent links where the flags do not link up. This is what a
SQL storage offers beyond the core ``SessionStorage`` (``PagedBranchReads``, ``Outlines`` and the
branch reads of ``protocols``); ``SqlSessionStorage`` adds the rest.
"""
from __future__ import annotations

import json
from collections.abc import Iterator

from ..errors import DamagedRowError
from ..messages import parts_problem
from ..shapes import Message, Messages
from .capabilities import TEXT_ONLY
from .repository import Repository
from .rows import HAS_TOOL_PART, MESSAGE_COLUMNS, message_from_row, messages_from_rows, read_json, readable

_MAX_DEPTH = 10_000_000
_PATH = """WITH RECURSIVE path(seq, parent_id, depth) AS (
        SELECT seq, parent_id, 0 FROM messages WHERE session_pk = :pk AND id = :leaf
        UNION ALL
        SELECT m.seq, m.parent_id, path.depth + 1 FROM messages m JOIN path
            ON m.session_pk = :pk AND m.id = path.parent_id
        WHERE path.depth < :max_depth
    )"""
"""The branch ending at ``:leaf``, one parent link at a time (``path.depth`` from the leaf): what a
read falls back to when the stretches do not give a linked branch."""
_STRETCHES = """WITH RECURSIVE stretches(first_seq, last_seq) AS (
        SELECT (SELECT MAX(s.seq) FROM messages s WHERE s.session_pk = :pk AND s.continues = 0 AND s.seq <= m.seq),
            m.seq
        FROM messages m WHERE m.session_pk = :pk AND m.id = :leaf
        UNION
        SELECT (SELECT MAX(s.seq) FROM messages s WHERE s.session_pk = :pk AND s.continues = 0 AND s.seq <= above.seq),
            above.seq
        FROM stretches JOIN messages start ON start.seq = stretches.first_seq
        JOIN messages above ON above.session_pk = :pk AND above.id = start.parent_id
    )"""
"""The stretches (``schema.MESSAGES``) of the branch ending at ``:leaf``, each as the seqs of its first
message and of the last one the branch takes from it: a hop per stretch, not per message. UNION, not
UNION ALL, so that flags damaged into a loop still end."""


def _on_branch(dialect):
    """Whether message ``m`` is on the branch of ``_STRETCHES``, which orders by ``m.seq`` from the root
    (a child is always written after its parent): each stretch is one range of seq. SQLite then reads
    the rows in seq order rather than sorting whole rows."""
    stretch = dialect.session_rows_between("b", "stretches.first_seq", "stretches.last_seq")
    return f"m.seq IN (SELECT b.seq FROM stretches JOIN messages b ON {stretch})"


_M_COLUMNS = ", ".join("m." + column for column in MESSAGE_COLUMNS.split(", "))


_IDS_PER_STATEMENT = 500
_LINKS_PER_PAGE = 10_000


def continuations(rows):
    """The ``continues`` flag of each ``(session key, message)`` of ``rows``, written in this order: 1
    for a message whose parent is the message of its session written just before it in ``rows``."""
    flags: list[int] = []
    previous: dict[int, str] = {}
    for pk, message in rows:
        flags.append(int(message["parent_id"] is not None and message["parent_id"] == previous.get(pk)))
        previous[pk] = message["id"]
    return flags


def _linked(rows, leaf_id):
    """Whether rows that start with (id, parent_id) are the branch from a root down to ``leaf_id``, each
    row the child of the one before: parent links decide a branch, so this lets a read trust the stretches."""
    return (bool(rows) and rows[0][1] is None and rows[-1][0] == leaf_id
            and [row[1] for row in rows[1:]] == [row[0] for row in rows[:-1]])


def _merged(stretches):
    """Seq ranges, oldest first, with overlapping ones (flags damaged into a loop) made one."""
    ranges: list[tuple[int, int]] = []
    for first, last in sorted(stretches):
        if ranges and first <= ranges[-1][1]:
            ranges[-1] = (ranges[-1][0], max(last, ranges[-1][1]))
        else:
            ranges.append((first, last))
    return ranges


def _assistant_turn(row):
    return {"id": row[0], "role": "assistant", "metadata": read_json(row[2], dict, f"message {row[0]!r}", "metadata")}


def _outline_parts(stored):
    """A text-less message's parts for an outline; unreadable ones, or parts of a shape the engine
    never writes, are drawn as no parts (a full read reports them)."""
    try:
        parts = json.loads(stored)
    except (TypeError, ValueError, RecursionError):
        return []
    return parts if isinstance(parts, list) and parts_problem(parts) is None else []


class BranchReads(Repository):
    """The reads of one session (key ``pk``) that follow where its rows lie."""

    def __init__(self, store, pk):
        super().__init__(store)
        self.pk = pk

    def _name(self):
        row = self._one("SELECT session_id FROM sessions WHERE pk = ?", (self.pk,))
        return f"session {row['session_id']!r}" if row else f"session #{self.pk}"

    def _messages(self, rows):
        """Messages from rows of ``MESSAGE_COLUMNS``. A damaged row is left out with a
        DamagedRowWarning naming it, so one bad row does not hide the rest of the session."""
        try:
            return Messages(messages_from_rows(rows))
        except DamagedRowError:
            return Messages(readable(rows, message_from_row, f"{self._name()}: "))

    def path(self, leaf_id) -> Messages:
        """Messages from the root down to ``leaf_id``."""
        return self._messages(self._branch_rows(leaf_id, _M_COLUMNS))

    def assistant_turns(self, leaf_id) -> list[dict]:
        """``{"id", "role", "metadata"}`` of each assistant message from the root down to ``leaf_id``,
        decoding no parts: what the prompt-cache report walks, a fraction of reading the branch. A
        message whose metadata cannot be read is left out with a DamagedRowWarning."""
        rows = self._branch_rows(leaf_id, "m.id, m.parent_id, CASE WHEN m.role = 'assistant' THEN m.metadata END")
        return readable((row for row in rows if row[2] is not None), _assistant_turn, f"{self._name()}: ")

    def path_stats(self, leaf_id) -> tuple[int, int]:
        """(length, stored token sum) of the path ending at ``leaf_id``, without decoding messages."""
        rows = self._branch_rows(leaf_id, "m.id, m.parent_id, m.tokens")
        return len(rows), sum(row[2] for row in rows)

    def _branch_rows(self, leaf_id, columns):
        """Rows of ``columns`` of ``m`` (id and parent_id first) from the root down to ``leaf_id``: a range
        of each stretch of the branch, or, where those do not link up (a stale flag, a broken parent
        link), a walk up the parent links."""
        params = {"pk": self.pk, "leaf": leaf_id}
        stretches = self._all(f"{_STRETCHES} SELECT first_seq, last_seq FROM stretches", params)
        if len(stretches) == 1:  # a branch never forked from: one range of the table, read in order, no sort
            rows = self._tuples(
                f"SELECT {columns} FROM messages m WHERE {self.dialect.session_rows_between('m', ':low', ':high')}"
                " ORDER BY m.seq",
                {"pk": self.pk, "low": stretches[0][0], "high": stretches[0][1]},
            )
        else:
            rows = self._tuples(
                f"{_STRETCHES} SELECT {columns} FROM messages m WHERE {_on_branch(self.dialect)} ORDER BY m.seq",
                params,
            )
        if _linked(rows, leaf_id):
            return rows
        return self._all(
            f"{_PATH} SELECT {columns} FROM path JOIN messages m ON m.seq = path.seq ORDER BY path.depth DESC",
            dict(params, max_depth=_MAX_DEPTH),
        )

    def outline(self) -> list[dict]:
        """Every message as a tree drawing needs it, in insertion order: id, parent, role, tokens, time
        (metadata left empty) and its parts. Only messages without text or with a tool part have their
        stored parts decoded; the others get their stored text as one text part, so outlining 20,000
        messages skips most of the JSON a full read decodes."""
        rows = self._tuples(
            "SELECT id, parent_id, role, tokens, created_at, text,"
            f" CASE WHEN text = '' OR {HAS_TOOL_PART} THEN parts END"
            " FROM messages WHERE session_pk = ? ORDER BY seq", (self.pk,))
        return [{"id": message_id, "parent_id": parent_id, "role": role, "tokens": tokens, "created_at": created_at,
                 "metadata": {}, "parts": [{"type": "text", "text": text}] if parts is None else _outline_parts(parts)}
                for message_id, parent_id, role, tokens, created_at, text, parts in rows]

    def has_tool_parts(self) -> bool:
        """Whether any message of the session holds a tool part (what ``tool_outline`` decodes)."""
        return bool(self._one(f"SELECT EXISTS (SELECT 1 FROM messages WHERE session_pk = ? AND {HAS_TOOL_PART})"
                              " AS found", (self.pk,))["found"])

    def tool_outline(self) -> Iterator[tuple]:
        """(id, parent id, role, parts) of every message, in insertion order, read a page at a time and
        held by nobody: what the tool-pair lint takes in. Only a message with a tool part has its parts
        decoded; every other one shares a single text part with no text."""
        span = self.seq_span()
        pages = self._rows_between(*span, f"m.id, m.parent_id, m.role, CASE WHEN m.{HAS_TOOL_PART} THEN m.parts END",
                                   _LINKS_PER_PAGE) if span else ()
        for page in pages:
            for _, message_id, parent_id, role, parts in page:
                yield message_id, parent_id, role, TEXT_ONLY if parts is None else _outline_parts(parts)

    def branch_ranges(self, leaf_id) -> list[tuple[int, int]] | None:
        """The seq ranges, oldest first, whose rows of this session are exactly the branch ending at
        ``leaf_id`` (``[]`` for an unknown leaf); None where its stretches do not link up (a stale flag,
        a broken parent link), whose branch ``branch_seqs`` walks instead. The links are checked as
        ``_linked`` checks them, on ids and parents read a page at a time."""
        stretches = self._tuples(f"{_STRETCHES} SELECT first_seq, last_seq FROM stretches",
                                            {"pk": self.pk, "leaf": leaf_id})
        if not stretches or any(first is None for first, _ in stretches):
            return [] if not stretches else None
        ranges, above = _merged(stretches), None
        for low, high in ranges:
            for page in self._rows_between(low, high, "m.id, m.parent_id", _LINKS_PER_PAGE):
                for _, message_id, parent_id in page:
                    if parent_id != above:
                        return None
                    above = message_id
        return ranges if above == leaf_id else None

    def branch_seqs(self, leaf_id) -> list[int]:
        """The seqs of the branch ending at ``leaf_id``, root first, found one parent link at a time."""
        rows = self._tuples(f"{_PATH} SELECT path.seq FROM path ORDER BY path.depth DESC",
                                       {"pk": self.pk, "leaf": leaf_id, "max_depth": _MAX_DEPTH})
        return [row[0] for row in rows]

    def seq_span(self) -> tuple[int, int] | None:
        """The seqs of the session's first and last messages; None when it has none."""
        low, high = self._tuples(
            "SELECT MIN(seq), MAX(seq) FROM messages WHERE session_pk = ?", (self.pk,))[0]
        return None if low is None else (low, high)

    def messages_between(self, low, high, *, page_size=1000) -> Iterator[Messages]:
        """The messages with seq in ``low .. high``, oldest first, in pages of at most ``page_size``."""
        for rows in self._rows_between(low, high, _M_COLUMNS, page_size):
            yield self._messages([row[1:] for row in rows])

    def _rows_between(self, low, high, columns, page_size):
        """Lists of (seq, *``columns`` of ``m``) with seq in ``low .. high``: each list starts after the
        last seq read (a keyset), so a page costs its own rows and no more."""
        sql = (f"SELECT m.seq, {columns} FROM messages m WHERE"
               f" {self.dialect.session_rows_between('m', ':low', ':high')} ORDER BY m.seq LIMIT :page")
        while low <= high:
            rows = self._tuples(sql, {"pk": self.pk, "low": low, "high": high, "page": page_size})
            if rows:
                yield rows
            if len(rows) < page_size:
                return
            low = rows[-1][0] + 1

    def messages_at(self, seqs) -> Messages:
        """The messages at ``seqs`` (a page of a walked branch), in that order."""
        if not seqs:
            return Messages()
        rows = self._tuples(
            f"SELECT seq, {MESSAGE_COLUMNS} FROM messages WHERE session_pk = ?"
            f" AND seq IN ({', '.join('?' * len(seqs))})",
            (self.pk, *seqs))
        by_seq = {row[0]: row[1:] for row in rows}
        return self._messages([by_seq[seq] for seq in seqs if seq in by_seq])

    def located(self, message_ids) -> dict[str, tuple[int, Message]]:
        """``{id: (seq, message)}`` of the readable messages among ``message_ids`` (a few: overlay ends,
        pins). A damaged one is left out without a word: the read that reaches it reports it."""
        ids, found = list(dict.fromkeys(message_ids)), {}
        for start in range(0, len(ids), _IDS_PER_STATEMENT):
            chunk = ids[start:start + _IDS_PER_STATEMENT]
            rows = self._tuples(
                f"SELECT seq, {MESSAGE_COLUMNS} FROM messages WHERE session_pk = ?"
                f" AND id IN ({', '.join('?' * len(chunk))})",
                (self.pk, *chunk))
            for seq, *row in rows:
                try:
                    found[row[0]] = (seq, message_from_row(row))
                except DamagedRowError:
                    continue
        return found
