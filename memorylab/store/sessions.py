"""Sessions: the catalog of a store's sessions, and the storage of one session's tree.

``store.sessions`` finds, creates, lists and imports sessions; ``store.sessions.storage(pk)`` is one
session's ``SqlSessionStorage``: its messages as a tree, its compaction overlays, its search, its
status, and its context blocks (``storage.blocks``). A ``Session`` holds one and never names the
internal key again.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache

from ..errors import ConflictError, DamagedRowError, InvalidMessageError, NotFoundError, StaleWriteError
from ..messages import message_text, parts_problem, utc_now_iso
from ..shapes import Message, Messages, Overlay, SearchHits, SessionRows
from .agents import register_agent_row
from .context import SessionBlocks
from .migrations import CONTINUING_MESSAGES
from .repository import Repository, insert_rows
from .rows import (HAS_TOOL_PART, MESSAGE_COLUMNS, dumps, dumps_checked, like_literal, message_from_row,
                   messages_from_rows, read_json, readable, session_name)

UNCHECKED = object()
"""``expected`` of a write that compares nothing (a status may be None, so None cannot say it)."""

LATEST_LEAF = object()
"""Parent marker for "append under the newest leaf" (the default of ``append``)."""

_MAX_DEPTH = 10_000_000
_MESSAGE_FIELDS = ("session_pk", "id", "parent_id", "role", "parts", "text", "created_at", "metadata", "tokens",
                   "continues")
_POINT_TO_LATEST = "UPDATE sessions SET updated_at = ?, latest_message_id = ? WHERE pk = ?"
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


def _on_branch(store):
    """Whether message ``m`` is on the branch of ``_STRETCHES``, which orders by ``m.seq`` from the root
    (a child is always written after its parent): each stretch is one range of seq. SQLite then reads
    the rows in seq order rather than sorting whole rows."""
    stretch = store._session_rows_between("b", "stretches.first_seq", "stretches.last_seq")
    return f"m.seq IN (SELECT b.seq FROM stretches JOIN messages b ON {stretch})"


_M_COLUMNS = ", ".join("m." + column for column in MESSAGE_COLUMNS.split(", "))


def message_row(store, pk, message, parent_id):
    """The values of a message row but ``continues``, for a normalized message (its search copy is ``store``'s)."""
    return (
        pk, message["id"], parent_id, message["role"], dumps_checked(message["parts"]),
        store._searchable(message_text(message)), message["created_at"], dumps_checked(message["metadata"]),
        message["tokens"],
    )


_APPENDED_VALUES = ("pk", "id", "parent", "role", "parts", "text", "created_at", "metadata", "tokens")
"""The parameters of ``_append_statement``, in the order of ``message_row``."""
_PARENTS = {
    # What an append under each kind of parent writes as parent_id and continues, and what the
    # session row must satisfy: the parent is read from it, or checked, in the statement itself.
    "latest": ("latest_message_id", "CASE WHEN latest_message_id IS NULL THEN 0 ELSE 1 END", ""),
    "root": ("NULL", "0", ""),
    "given": (":parent", "CASE WHEN latest_message_id = :parent THEN 1 ELSE 0 END",
              " AND EXISTS (SELECT 1 FROM messages WHERE session_pk = :pk AND id = :parent)"),
}


@cache
def _append_statement(store_type, parent_kind):
    """One statement that writes a message under its parent as the session row says it (locked where
    the backend needs that), returning the parent it wrote. It writes nothing, and returns no row, for
    a repeated id, an unknown parent or a session gone; where the backend chains writes it moves the
    session's newest pointer too."""
    written, continues, known = _PARENTS[parent_kind]
    insert = (f"INSERT INTO messages ({', '.join(_MESSAGE_FIELDS)}) SELECT :pk, :id, {written}, :role, :parts, :text,"
              f" :created_at, :metadata, :tokens, {continues} FROM sessions WHERE pk = :pk{known}"
              f"{store_type._FOR_UPDATE} ON CONFLICT (session_pk, id) DO NOTHING RETURNING parent_id")
    if not store_type._CHAINED_WRITES:
        return insert
    return (f"WITH added AS ({insert}) UPDATE sessions SET updated_at = :now, latest_message_id = :id FROM added"
            " WHERE pk = :pk RETURNING added.parent_id")


def continuations(rows):
    """The ``continues`` flag of each ``(session key, message)`` of ``rows``, written in this order: 1
    for a message whose parent is the message of its session written just before it in ``rows``."""
    flags, previous = [], {}
    for pk, message in rows:
        flags.append(int(message["parent_id"] is not None and message["parent_id"] == previous.get(pk)))
        previous[pk] = message["id"]
    return flags


def _linked(rows, leaf_id):
    """Whether rows that start with (id, parent_id) are the branch from a root down to ``leaf_id``, each
    row the child of the one before: parent links decide a branch, so this lets a read trust the stretches."""
    return (bool(rows) and rows[0][1] is None and rows[-1][0] == leaf_id
            and [row[1] for row in rows[1:]] == [row[0] for row in rows[:-1]])


def _assistant_turn(row):
    return {"id": row[0], "role": "assistant", "metadata": read_json(row[2], dict, f"message {row[0]!r}", "metadata")}


def _overlay_from_row(row):
    return {
        "id": row["id"],
        "from_id": row["from_id"],
        "to_id": row["to_id"],
        "summary": row["summary"],
        "created_at": row["created_at"],
        "metadata": read_json(row["metadata"], dict, f"overlay {row['id']}", "metadata"),
    }


def _session_info(row):
    """A session row as ``SqlSessionStorage.info`` gives it; DamagedRowError when its metadata cannot be read."""
    return {
        "session_id": row["session_id"],
        "tenant_id": row["tenant_id"],
        "agent_id": row["agent_id"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "metadata": read_json(row["metadata"], dict, session_name(row), "metadata"),
    }


def _session_from_row(row):
    """A row of ``SqlSessionCatalog.list``: the session and its counts."""
    return {**_session_info(row), "message_count": row["message_count"], "branch_count": row["branch_count"],
            "tokens": row["tokens"]}


SETTLE_SEARCH_AFTER = 1_000
"""Messages an import writes before it settles the search index. SQLite's full-text index keeps one
segment per insert statement and merges the backlog a little at each later write: after importing
100,000 messages, an append cost 427 µs against 328 µs in a small store until the index was merged
(0.17 s), and 338 µs after."""


class SqlSessionCatalog(Repository):
    """Every session of the store, by (tenant, agent, session id)."""

    def find(self, tenant_id, agent_id, session_id) -> int | None:
        """The internal key of a session, or None."""
        row = self._one(
            "SELECT pk FROM sessions WHERE tenant_id = ? AND agent_id = ? AND session_id = ?",
            (tenant_id, agent_id, session_id),
        )
        return row["pk"] if row else None

    def hold_name(self, tenant_id, agent_id, session_id) -> None:
        """Inside the caller's transaction, keep other writers that hold this name too from creating or
        filling the session until it ends, whether the session exists yet or not, so that what ``find``
        and ``message_ids`` answer stays true (an import reads what a session holds, then writes the
        rest). SQLite's write transaction holds the whole file already."""
        if self._store._NAME_LOCK:
            with self.transaction() as conn:
                conn.execute(self._store._NAME_LOCK, {"name": dumps([tenant_id, agent_id, session_id])})

    def ensure(self, tenant_id, agent_id, session_id, metadata=None) -> int:
        """The key of a session, created (with ``metadata``) when it does not exist yet."""
        with self.transaction() as conn:
            pk = self.find(tenant_id, agent_id, session_id)
            if pk is not None:
                return pk
            now = utc_now_iso()
            register_agent_row(conn, tenant_id, agent_id, now)
            # A writer that does not hold the whole database may lose the race to create it.
            row = conn.execute(
                "INSERT INTO sessions (tenant_id, agent_id, session_id, created_at, updated_at, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, agent_id, session_id) DO NOTHING RETURNING pk",
                (tenant_id, agent_id, session_id, now, now, dumps(metadata or {})),
            ).fetchone()
            return row[0] if row else self.find(tenant_id, agent_id, session_id)

    def insert_messages(self, rows) -> None:
        """Write ``(session key, message)`` pairs, each message normalized with its ``parent_id`` and
        ``tokens``, in multi-row statements without checking parents; each session's last message
        becomes its newest. For importers, which check the tree themselves; joins their transaction."""
        if not rows:
            return
        latest = {pk: message["id"] for pk, message in rows}
        with self.transaction() as conn:
            insert_rows(conn, "messages", _MESSAGE_FIELDS,
                        ((*message_row(self._store, pk, m, m["parent_id"]), continues)
                         for (pk, m), continues in zip(rows, continuations(rows))))
            now = utc_now_iso()
            conn.executemany(_POINT_TO_LATEST, [(now, message_id, pk) for pk, message_id in latest.items()])

    def settle_search(self, written) -> None:
        """After an import that wrote ``written`` messages in multi-row statements, merge what the
        search index buffered for them, so the appends that follow do not pay for it (a backend whose
        index needs no such care does nothing)."""
        if written >= SETTLE_SEARCH_AFTER:
            self._store._settle_search("messages")

    def lay_out_branches(self) -> None:
        """Recompute every message's ``continues`` flag from the parent links (what ``memorylab check``
        suggests when flags went stale behind the engine's back: reads stay right, but walk such
        branches one parent link at a time)."""
        with self.transaction() as conn:
            conn.execute(f"UPDATE messages SET continues = CASE WHEN seq IN ({CONTINUING_MESSAGES}) THEN 1 ELSE 0 END")

    def storage(self, pk) -> SqlSessionStorage:
        """The ``SqlSessionStorage`` of the session with internal key ``pk``."""
        return SqlSessionStorage(self._store, pk)

    def list(self, *, tenant_id=None, agent_id=None, session_id=None, search=None, limit=None,
             offset=0) -> SessionRows:
        """Sessions, most recently updated first, with their message count, branch (leaf) count and
        stored token total. ``session_id`` picks one by its id; ``search`` keeps those whose id or title
        holds it (any case); ``limit`` and ``offset`` page through them in SQL, so a store of many
        sessions is never read whole. A session whose row cannot be read is left out with a
        DamagedRowWarning (``memorylab check`` lists it)."""
        where, params = self._filters(tenant_id, agent_id, session_id, search)
        params.update(limit=self._store._NO_LIMIT if limit is None else limit, offset=offset)
        # The page is chosen first; its counts come from two aggregates over its own messages only.
        # Leaves = messages - messages that are somebody's parent (index-only, no per-message lookup).
        rows = self._all(
            f"""WITH chosen AS (
                SELECT * FROM sessions s {where} ORDER BY s.updated_at DESC, s.pk DESC LIMIT :limit OFFSET :offset
            )
            SELECT chosen.*, COALESCE(c.n, 0) AS message_count, CAST(COALESCE(c.tokens, 0) AS BIGINT) AS tokens,
                   COALESCE(c.n, 0) - COALESCE(p.parents, 0) AS branch_count
            FROM chosen
            LEFT JOIN (SELECT session_pk, COUNT(*) AS n, SUM(tokens) AS tokens FROM messages
                       WHERE session_pk IN (SELECT pk FROM chosen) GROUP BY session_pk) c ON c.session_pk = chosen.pk
            LEFT JOIN (SELECT session_pk, COUNT(DISTINCT parent_id) AS parents FROM messages
                       WHERE parent_id IS NOT NULL AND session_pk IN (SELECT pk FROM chosen) GROUP BY session_pk) p
                ON p.session_pk = chosen.pk
            ORDER BY chosen.updated_at DESC, chosen.pk DESC""",
            params,
        )
        return SessionRows(readable(rows, _session_from_row))

    def count(self, *, tenant_id=None, agent_id=None, search=None) -> int:
        """How many sessions ``list`` would page through with the same filters."""
        where, params = self._filters(tenant_id, agent_id, None, search)
        return self._one(f"SELECT COUNT(*) AS n FROM sessions s {where}", params)["n"]

    def stamp(self) -> tuple:
        """What moves whenever a session, a message or an overlay of the store changes: the session
        count and newest update, the overlay count, id sum (an overlay removed and another added) and
        newest. One cheap read, for a cache of something read from every session (the lab's audit of
        every compaction)."""
        row = self._one("SELECT (SELECT COUNT(*) FROM sessions) AS sessions, (SELECT MAX(updated_at) FROM sessions)"
                        " AS updated, COUNT(*) AS overlays, CAST(COALESCE(SUM(id), 0) AS BIGINT) AS ids,"
                        " MAX(created_at) AS newest FROM compactions")
        return (row["sessions"], row["updated"], row["overlays"], row["ids"], row["newest"])

    def _filters(self, tenant_id, agent_id, session_id, search):
        where, params = [], {}
        for column, value in (("tenant_id", tenant_id), ("agent_id", agent_id), ("session_id", session_id)):
            if value is not None:
                where.append(f"s.{column} = :{column}")
                params[column] = value
        if search:
            title = self._store._json_text("s.metadata", "title")
            where.append(f"(lower(s.session_id) LIKE :search ESCAPE '\\' OR lower(COALESCE({title}, '')) LIKE :search"
                         " ESCAPE '\\')")
            params["search"] = f"%{like_literal(search.lower())}%"
        return ("WHERE " + " AND ".join(where)) if where else "", params

    def write(self, tenant_id, agent_id, session_id, *, created_at, updated_at, metadata,
              frozen_prompt, messages, compactions, context_blocks, pins=(), replace=False) -> int:
        """Write a complete, already validated session in one transaction (all or nothing)."""
        with self.transaction() as conn:
            existing = self.find(tenant_id, agent_id, session_id)
            if existing is not None:
                if not replace:
                    raise ConflictError(
                        f"session {session_id!r} already exists for agent {agent_id!r}; "
                        "import it under another id or replace it"
                    )
                conn.execute("DELETE FROM sessions WHERE pk = ?", (existing,))
            register_agent_row(conn, tenant_id, agent_id, created_at)
            pk = conn.execute(
                "INSERT INTO sessions (tenant_id, agent_id, session_id, created_at, updated_at, metadata,"
                " cached_prompt) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING pk",
                (tenant_id, agent_id, session_id, created_at, updated_at, dumps(metadata), frozen_prompt),
            ).fetchone()[0]
            flags = continuations([(pk, m) for m in messages])
            insert_rows(conn, "messages", _MESSAGE_FIELDS,
                        ((*message_row(self._store, pk, m, m["parent_id"]), continues)
                         for m, continues in zip(messages, flags)))
            conn.execute("UPDATE sessions SET latest_message_id = ? WHERE pk = ?",
                         (messages[-1]["id"] if messages else None, pk))
            conn.executemany(
                "INSERT INTO compactions (session_pk, id, from_id, to_id, summary, created_at, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (pk, c["id"], c["from_id"], c["to_id"], c["summary"], c["created_at"],
                     dumps(c.get("metadata") or {}))
                    for c in compactions
                ],
            )
            conn.executemany(
                "INSERT INTO message_pins (session_pk, message_id, note, pinned_at) VALUES (?, ?, ?, ?)",
                [(pk, pin["message_id"], pin["note"], pin["pinned_at"]) for pin in pins],
            )
            conn.executemany(
                "INSERT INTO context_blocks (session_pk, label, content, updated_at) VALUES (?, ?, ?, ?)",
                [(pk, b["label"], b["content"], b.get("updated_at") or utc_now_iso()) for b in context_blocks],
            )
        return pk


_IDS_PER_STATEMENT = 500
_LINKS_PER_PAGE = 10_000
_TEXT_ONLY = ({"type": "text"},)
"""The parts of every message without a tool part in ``tool_outline`` (shared: read, never change)."""


def _merged(stretches):
    """Seq ranges, oldest first, with overlapping ones (flags damaged into a loop) made one."""
    ranges = []
    for first, last in sorted(stretches):
        if ranges and first <= ranges[-1][1]:
            ranges[-1] = (ranges[-1][0], max(last, ranges[-1][1]))
        else:
            ranges.append((first, last))
    return ranges


def _outline_parts(stored):
    """A text-less message's parts for an outline; unreadable ones, or parts of a shape the engine
    never writes, are drawn as no parts (a full read reports them)."""
    try:
        parts = json.loads(stored)
    except (TypeError, ValueError, RecursionError):
        return []
    return parts if isinstance(parts, list) and parts_problem(parts) is None else []


def _damage_named(read, where=""):
    """``read()``, its DamagedRowError prefixed with ``where`` and told where such rows are listed."""
    try:
        return read()
    except DamagedRowError as error:
        raise DamagedRowError(f"{where}{error}; `memorylab check` lists such rows and `memorylab check "
                              "--repair` sets them aside") from None


class SqlSessionStorage(Repository):
    """One session's rows: a tree of messages (each has a parent; the newest is where appends go by
    default), the compaction overlays on it, its status and its context blocks.

    Every write that depends on the tree's shape (append, update, delete, overlays) runs in one
    transaction that locks the session first where the backend needs that (``_FOR_UPDATE``), so two
    writers of one session take turns and the tree stays valid. Reads skip a damaged message row
    with a ``DamagedRowWarning`` instead of failing for the whole session.
    """

    def __init__(self, store, pk):
        super().__init__(store)
        self.pk = pk
        self.blocks = SessionBlocks(store, pk)

    def __repr__(self):
        return f"<SqlSessionStorage #{self.pk} of {self._store!r}>"

    def _lock(self, conn):
        if self._store._FOR_UPDATE:
            conn.execute(f"SELECT 1 FROM sessions WHERE pk = ?{self._store._FOR_UPDATE}", (self.pk,))

    # -- the session row -----------------------------------------------------------------------

    def info(self) -> dict:
        """The session row; DamagedRowError when its metadata cannot be read."""
        row = self._one("SELECT * FROM sessions WHERE pk = ?", (self.pk,))
        if row is None:
            raise NotFoundError(f"session #{self.pk} no longer exists")
        return _damage_named(lambda: _session_info(row))

    def set_metadata(self, metadata) -> None:
        with self.transaction() as conn:
            conn.execute(
                "UPDATE sessions SET metadata = ?, updated_at = ? WHERE pk = ?",
                (dumps(metadata), utc_now_iso(), self.pk),
            )

    def status(self) -> str | None:
        """The memory manager's status of this session (None: in progress)."""
        row = self._one("SELECT status FROM sessions WHERE pk = ?", (self.pk,))
        return row["status"] if row else None

    def set_status(self, status, updated_at, *, expected=UNCHECKED) -> None:
        """``expected``: the status the writer read (None: in progress); another one stored since is a
        ``StaleWriteError`` and nothing is written."""
        with self.transaction() as conn:
            if expected is not UNCHECKED:
                self._lock(conn)
                row = conn.execute("SELECT status FROM sessions WHERE pk = ?", (self.pk,)).fetchone()
                stored = row[0] if row else None
                if stored != expected:
                    raise StaleWriteError(f"the status of session {self._name()}", expected=expected or "in progress",
                                          version=stored or "in progress", stored=stored)
            conn.execute("UPDATE sessions SET status = ?, updated_at = ? WHERE pk = ?",
                         (status, updated_at, self.pk))

    def delete(self) -> None:
        """Remove the session and everything it holds."""
        with self.transaction() as conn:
            conn.execute("DELETE FROM sessions WHERE pk = ?", (self.pk,))

    def _name(self):
        row = self._one("SELECT session_id FROM sessions WHERE pk = ?", (self.pk,))
        return f"session {row['session_id']!r}" if row else f"session #{self.pk}"

    # -- messages -----------------------------------------------------------------------------

    def append(self, message, parent=LATEST_LEAF) -> Message:
        """Store a normalized message (with ``tokens``) under ``parent``; a repeated id is a no-op.

        The statement that writes the message reads its parent from the session row, which it locks where
        the backend needs that, so two processes appending "under the latest leaf" at once still produce a
        valid tree.
        """
        store, kind = self._store, "latest" if parent is LATEST_LEAF else "root" if parent is None else "given"
        values = message_row(store, self.pk, message, None if parent is LATEST_LEAF else parent)
        params = dict(zip(_APPENDED_VALUES, values), now=utc_now_iso())
        if store._CHAINED_WRITES:
            row = store._write_one(_append_statement(type(store), kind), params)
        else:
            with self.transaction() as conn:
                row = conn.execute(_append_statement(type(store), kind), params).fetchone()
                if row is not None:
                    conn.execute(_POINT_TO_LATEST, (params["now"], message["id"], self.pk))
        return self._not_appended(message, parent) if row is None else dict(message, parent_id=row[0])

    def _not_appended(self, message, parent):
        """What an append that wrote nothing answers: the stored original of a repeated id, else the
        NotFoundError of a session or a parent not there."""
        stored = self.get(message["id"])
        if stored is not None:
            return stored
        if self._one("SELECT 1 FROM sessions WHERE pk = ?", (self.pk,)) is None:
            raise NotFoundError(f"session #{self.pk} no longer exists")
        if parent is not LATEST_LEAF and parent is not None and \
                self._one("SELECT 1 FROM messages WHERE session_pk = ? AND id = ?", (self.pk, parent)) is None:
            raise NotFoundError(
                f"parent {parent!r} is not a message of this session; append with parent_id=None "
                "to start a new root"
            )
        return self.append(message, parent)  # another writer's message of this id was removed meanwhile

    def message_ids(self) -> set[str]:
        """The ids of every message of the session, without reading the messages."""
        return {row["id"] for row in self._all("SELECT id FROM messages WHERE session_pk = ?", (self.pk,))}

    def get(self, message_id) -> Message | None:
        """The stored message, None when there is none, DamagedRowError when its row is unreadable."""
        row = self._one(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_pk = ? AND id = ?", (self.pk, message_id)
        )
        if row is None:
            return None
        return _damage_named(lambda: message_from_row(row), f"{self._name()}, ")

    def _messages(self, rows):
        """Messages from rows of ``MESSAGE_COLUMNS``. A damaged row is left out with a
        DamagedRowWarning naming it, so one bad row does not hide the rest of the session."""
        try:
            return Messages(messages_from_rows(rows))
        except DamagedRowError:
            return Messages(readable(rows, message_from_row, f"{self._name()}: "))

    def latest_leaf_id(self) -> str | None:
        row = self._one("SELECT latest_message_id FROM sessions WHERE pk = ?", (self.pk,))
        return row["latest_message_id"] if row else None

    def _reset_latest(self, conn):
        """Recompute the newest message after removals (rare, so a scan is fine)."""
        conn.execute(
            "UPDATE sessions SET latest_message_id = (SELECT id FROM messages WHERE session_pk = :pk"
            " ORDER BY seq DESC LIMIT 1), updated_at = :now WHERE pk = :pk",
            {"pk": self.pk, "now": utc_now_iso()},
        )

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
            rows = self._store._all_tuples(
                f"SELECT {columns} FROM messages m WHERE {self._store._session_rows_between('m', ':low', ':high')}"
                " ORDER BY m.seq",
                {"pk": self.pk, "low": stretches[0][0], "high": stretches[0][1]},
            )
        else:
            rows = self._store._all_tuples(
                f"{_STRETCHES} SELECT {columns} FROM messages m WHERE {_on_branch(self._store)} ORDER BY m.seq",
                params,
            )
        if _linked(rows, leaf_id):
            return rows
        return self._all(
            f"{_PATH} SELECT {columns} FROM path JOIN messages m ON m.seq = path.seq ORDER BY path.depth DESC",
            dict(params, max_depth=_MAX_DEPTH),
        )

    def children(self, message_id) -> Messages:
        """The messages under ``message_id`` (None: the roots), oldest first."""
        # Two spellings rather than "IS ?": PostgreSQL's IS NOT DISTINCT FROM cannot use an index.
        parent = "parent_id IS NULL" if message_id is None else "parent_id = ?"
        rows = self._all(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_pk = ? AND {parent} ORDER BY seq",
            (self.pk,) if message_id is None else (self.pk, message_id),
        )
        return self._messages(rows)

    def child_counts(self) -> dict[str, int]:
        """{message id: number of children} for every message that has children."""
        rows = self._all(
            "SELECT parent_id, COUNT(*) AS n FROM messages WHERE session_pk = ? AND parent_id IS NOT NULL"
            " GROUP BY parent_id",
            (self.pk,),
        )
        return {r["parent_id"]: r["n"] for r in rows}

    def newest_leaf_under(self, message_id) -> str | None:
        """The newest leaf of the subtree rooted at ``message_id`` (the message itself if it is a leaf)."""
        row = self._one(
            """WITH RECURSIVE below(id, seq) AS (
                SELECT id, seq FROM messages WHERE session_pk = :pk AND id = :id
                UNION ALL
                SELECT m.id, m.seq FROM messages m JOIN below ON m.session_pk = :pk AND m.parent_id = below.id
            )
            SELECT id FROM below ORDER BY seq DESC LIMIT 1""",
            {"pk": self.pk, "id": message_id},
        )
        return row["id"] if row else None

    def leaves(self) -> Messages:
        """Every childless message, newest first."""
        rows = self._all(
            f"""SELECT {MESSAGE_COLUMNS} FROM messages m WHERE session_pk = ? AND NOT EXISTS
                (SELECT 1 FROM messages c WHERE c.session_pk = m.session_pk AND c.parent_id = m.id)
            ORDER BY seq DESC""",
            (self.pk,),
        )
        return self._messages(rows)

    def all(self) -> Messages:
        """Every message of the session in insertion order (parents before children)."""
        rows = self._all(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_pk = ? ORDER BY seq", (self.pk,))
        return self._messages(rows)

    def outline(self) -> list[dict]:
        """Every message as a tree drawing needs it, in insertion order: id, parent, role, tokens, time
        (metadata left empty) and its parts. Only messages without text or with a tool part have their
        stored parts decoded; the others get their stored text as one text part, so outlining 20,000
        messages skips most of the JSON a full read decodes."""
        rows = self._store._all_tuples(
            "SELECT id, parent_id, role, tokens, created_at, text,"
            f" CASE WHEN text = '' OR {HAS_TOOL_PART} THEN parts END"
            " FROM messages WHERE session_pk = ? ORDER BY seq", (self.pk,))
        return [{"id": message_id, "parent_id": parent_id, "role": role, "tokens": tokens, "created_at": created_at,
                 "metadata": {}, "parts": [{"type": "text", "text": text}] if parts is None else _outline_parts(parts)}
                for message_id, parent_id, role, tokens, created_at, text, parts in rows]

    def count(self) -> int:
        return self._one("SELECT COUNT(*) AS n FROM messages WHERE session_pk = ?", (self.pk,))["n"]

    def update(self, message) -> Message:
        """Replace role, parts, metadata and tokens of a stored message; its place in the tree stays.
        The session's update time moves, so what was read of a branch before is known to be stale."""
        with self.transaction() as conn:
            self._lock(conn)
            current = self.get(message["id"])
            if current is None:
                raise NotFoundError(f"message {message['id']!r} is not in this session")
            conn.execute(
                "UPDATE messages SET role = ?, parts = ?, text = ?, created_at = ?, metadata = ?, tokens = ?"
                " WHERE session_pk = ? AND id = ?",
                (
                    message["role"], dumps(message["parts"]), self._store._searchable(message_text(message)),
                    message["created_at"], dumps(message["metadata"]), message["tokens"],
                    self.pk, message["id"],
                ),
            )
            conn.execute("UPDATE sessions SET updated_at = ? WHERE pk = ?", (utc_now_iso(), self.pk))
        return dict(message, parent_id=current["parent_id"])

    def delete_messages(self, message_ids) -> int:
        """Remove messages, re-attaching their children to their parents (the tree stays connected).

        Overlays that start or end at a removed message can never apply again and go too.
        Returns the number of messages removed.
        """
        pk, removed = self.pk, 0
        with self.transaction() as conn:
            self._lock(conn)
            for message_id in dict.fromkeys(message_ids):
                row = conn.execute(
                    "SELECT parent_id FROM messages WHERE session_pk = ? AND id = ?", (pk, message_id)
                ).fetchone()
                if row is None:
                    continue
                # A child that continued the removed message now follows an earlier one.
                conn.execute(
                    "UPDATE messages SET parent_id = ?, continues = 0 WHERE session_pk = ? AND parent_id = ?",
                    (row["parent_id"], pk, message_id),
                )
                conn.execute(
                    "DELETE FROM compactions WHERE session_pk = ? AND (from_id = ? OR to_id = ?)",
                    (pk, message_id, message_id),
                )
                conn.execute("DELETE FROM message_pins WHERE session_pk = ? AND message_id = ?", (pk, message_id))
                conn.execute("DELETE FROM messages WHERE session_pk = ? AND id = ?", (pk, message_id))
                removed += 1
            self._reset_latest(conn)
        return removed

    def clear(self) -> int:
        """Remove every message, overlay, pin and skill activation; returns the number of messages."""
        with self.transaction() as conn:
            self._lock(conn)
            conn.execute("DELETE FROM compactions WHERE session_pk = ?", (self.pk,))
            conn.execute("DELETE FROM message_pins WHERE session_pk = ?", (self.pk,))
            conn.execute("DELETE FROM skill_activations WHERE session_pk = ?", (self.pk,))
            removed = conn.execute("DELETE FROM messages WHERE session_pk = ?", (self.pk,)).rowcount
            self._reset_latest(conn)
        return removed

    def search(self, query, *, tenant_id, limit=20, roles=None) -> SearchHits:
        """``store.search`` within this session (``tenant_id`` is the session's own)."""
        return self._store.search(query, tenant_id=tenant_id, limit=limit, session_pk=self.pk, roles=roles)

    # -- compaction overlays -------------------------------------------------------------------

    def add_overlay(self, summary, from_id, to_id, metadata=None) -> Overlay:
        """Store an overlay; ``from_id`` must be ``to_id`` or one of its ancestors."""
        pk = self.pk
        with self.transaction() as conn:
            self._lock(conn)
            if self.get(to_id) is None:
                raise NotFoundError(f"to_id {to_id!r} is not a message of this session")
            if from_id not in {m["id"] for m in self.path(to_id)}:
                raise InvalidMessageError(
                    f"from_id {from_id!r} is not on the path to {to_id!r}: an overlay covers one "
                    "root-to-leaf range"
                )
            # Overlay ids are numbered per session so that an export re-imports with the same ids.
            overlay_id = conn.execute(
                "SELECT COALESCE(MAX(id), 0) + 1 FROM compactions WHERE session_pk = ?", (pk,)
            ).fetchone()[0]
            conn.execute(
                "INSERT INTO compactions (session_pk, id, from_id, to_id, summary, created_at, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (pk, overlay_id, from_id, to_id, summary, utc_now_iso(), dumps(metadata or {})),
            )
            return self.get_overlay(overlay_id)

    def get_overlay(self, overlay_id) -> Overlay | None:
        """The overlay, None when there is none, DamagedRowError when its row is unreadable."""
        row = self._one("SELECT * FROM compactions WHERE session_pk = ? AND id = ?", (self.pk, overlay_id))
        return _damage_named(lambda: _overlay_from_row(row), f"{self._name()}, ") if row else None

    def overlays(self) -> list[Overlay]:
        """Every overlay, oldest first; a damaged one is left out with a DamagedRowWarning (the
        history then reads as if it had never been written)."""
        rows = self._all("SELECT * FROM compactions WHERE session_pk = ? ORDER BY id", (self.pk,))
        return readable(rows, _overlay_from_row, f"{self._name()}: ")

    def delete_overlay(self, overlay_id) -> None:
        with self.transaction() as conn:
            deleted = conn.execute(
                "DELETE FROM compactions WHERE session_pk = ? AND id = ?", (self.pk, overlay_id)
            ).rowcount
        if not deleted:
            raise NotFoundError(f"overlay {overlay_id!r} is not in this session")

    # -- pins ------------------------------------------------------------------------------------

    def pin(self, message_id, note="") -> dict:
        """Pin a stored message (again: its note changes, its time stays). The session's update time
        moves, since every read of a branch with an overlay over the message changes."""
        with self.transaction() as conn:
            self._lock(conn)
            stored = conn.execute("SELECT 1 FROM messages WHERE session_pk = ? AND id = ?", (self.pk, message_id))
            if stored.fetchone() is None:
                raise NotFoundError(f"cannot pin {message_id!r}: it is not a message of this session")
            now = utc_now_iso()
            conn.execute(
                "INSERT INTO message_pins (session_pk, message_id, note, pinned_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (session_pk, message_id) DO UPDATE SET note = excluded.note",
                (self.pk, message_id, note, now))
            conn.execute("UPDATE sessions SET updated_at = ? WHERE pk = ?", (now, self.pk))
        return next(pin for pin in self.pins() if pin["message_id"] == message_id)

    def unpin(self, message_id) -> bool:
        """Remove a pin; False when the message was not pinned."""
        with self.transaction() as conn:
            removed = conn.execute("DELETE FROM message_pins WHERE session_pk = ? AND message_id = ?",
                                   (self.pk, message_id)).rowcount
            if removed:
                conn.execute("UPDATE sessions SET updated_at = ? WHERE pk = ?", (utc_now_iso(), self.pk))
        return bool(removed)

    def pins(self) -> list[dict]:
        """``[{"message_id", "note", "pinned_at"}]``, oldest pin first."""
        rows = self._all("SELECT message_id, note, pinned_at FROM message_pins WHERE session_pk = ?"
                         " ORDER BY pinned_at, message_id", (self.pk,))
        return [dict(row) for row in rows]

    def pinned_ids(self) -> frozenset:
        return frozenset(row[0] for row in self._store._all_tuples(
            "SELECT message_id FROM message_pins WHERE session_pk = ?", (self.pk,)))

    # -- paged reads -----------------------------------------------------------------------------
    # A long branch or session read a page at a time (``memorylab.history.paged``): first where its
    # rows are (a few seq ranges, or the seqs of a parent walk), then one page of rows per statement.

    def branch_ranges(self, leaf_id) -> list[tuple[int, int]] | None:
        """The seq ranges, oldest first, whose rows of this session are exactly the branch ending at
        ``leaf_id`` (``[]`` for an unknown leaf); None where its stretches do not link up (a stale flag,
        a broken parent link), whose branch ``branch_seqs`` walks instead. The links are checked as
        ``_linked`` checks them, on ids and parents read a page at a time."""
        stretches = self._store._all_tuples(f"{_STRETCHES} SELECT first_seq, last_seq FROM stretches",
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
        rows = self._store._all_tuples(f"{_PATH} SELECT path.seq FROM path ORDER BY path.depth DESC",
                                       {"pk": self.pk, "leaf": leaf_id, "max_depth": _MAX_DEPTH})
        return [row[0] for row in rows]

    def seq_span(self) -> tuple[int, int] | None:
        """The seqs of the session's first and last messages; None when it has none."""
        low, high = self._store._all_tuples(
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
               f" {self._store._session_rows_between('m', ':low', ':high')} ORDER BY m.seq LIMIT :page")
        while low <= high:
            rows = self._store._all_tuples(sql, {"pk": self.pk, "low": low, "high": high, "page": page_size})
            if rows:
                yield rows
            if len(rows) < page_size:
                return
            low = rows[-1][0] + 1

    def messages_at(self, seqs) -> Messages:
        """The messages at ``seqs`` (a page of a walked branch), in that order."""
        if not seqs:
            return Messages()
        rows = self._store._all_tuples(
            f"SELECT seq, {MESSAGE_COLUMNS} FROM messages WHERE session_pk = ? AND seq IN ({', '.join('?' * len(seqs))})",
            (self.pk, *seqs))
        by_seq = {row[0]: row[1:] for row in rows}
        return self._messages([by_seq[seq] for seq in seqs if seq in by_seq])

    def located(self, message_ids) -> dict[str, tuple[int, Message]]:
        """``{id: (seq, message)}`` of the readable messages among ``message_ids`` (a few: overlay ends,
        pins). A damaged one is left out without a word: the read that reaches it reports it."""
        ids, found = list(dict.fromkeys(message_ids)), {}
        for start in range(0, len(ids), _IDS_PER_STATEMENT):
            chunk = ids[start:start + _IDS_PER_STATEMENT]
            rows = self._store._all_tuples(
                f"SELECT seq, {MESSAGE_COLUMNS} FROM messages WHERE session_pk = ? AND id IN ({', '.join('?' * len(chunk))})",
                (self.pk, *chunk))
            for seq, *row in rows:
                try:
                    found[row[0]] = (seq, message_from_row(row))
                except DamagedRowError:
                    continue
        return found

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
                yield message_id, parent_id, role, _TEXT_ONLY if parts is None else _outline_parts(parts)
