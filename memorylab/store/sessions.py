"""Sessions: the catalog of a store's sessions, and the storage of one session's tree.

``store.sessions`` finds, creates, lists and imports sessions; ``store.sessions.storage(pk)`` is one
session's ``SqlSessionStorage``: its messages as a tree, its compaction overlays, its search, its
status, and its context blocks (``storage.blocks``); the reads that follow where its rows lie
(branches, pages, outlines) are ``branches.BranchReads``, which it extends. A ``Session`` holds one
and never names the internal key again.
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import cast

from ..errors import ConflictError, DamagedRowError, InvalidMessageError, NotFoundError, StaleWriteError
from ..messages import message_text, utc_now_iso
from ..shapes import Message, Messages, Overlay, SearchHits, SessionRows
from .agents import register_agent_row
from .branches import BranchReads, continuations
from .context import SessionBlocks
from .migrations import CONTINUING_MESSAGES
from .repository import Repository, insert_rows
from .rows import (
    MESSAGE_COLUMNS,
    dumps,
    dumps_checked,
    like_literal,
    message_from_row,
    placed,
    read_json,
    readable,
    session_name,
)

UNCHECKED = object()
"""``expected`` of a write that compares nothing (a status may be None, so None cannot say it)."""

LATEST_LEAF = object()
"""Parent marker for "append under the newest leaf" (the default of ``append``)."""

_MESSAGE_FIELDS = ("session_pk", "id", "parent_id", "role", "parts", "text", "created_at", "metadata", "tokens",
                   "continues")
_POINT_TO_LATEST = "UPDATE sessions SET updated_at = ?, latest_message_id = ? WHERE pk = ?"


def message_row(dialect, pk, message, parent_id):
    """The values of a message row but ``continues``, for a normalized message (its search copy is ``dialect``'s)."""
    return (
        pk, message["id"], parent_id, message["role"], dumps_checked(message["parts"]),
        dialect.searchable(message_text(message)), message["created_at"], dumps_checked(message["metadata"]),
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
def _append_statement(dialect, parent_kind):
    """One statement that writes a message under its parent as the session row says it (locked where
    the backend needs that), returning the parent it wrote. It writes nothing, and returns no row, for
    a repeated id, an unknown parent or a session gone; where the backend chains writes it moves the
    session's newest pointer too."""
    written, continues, known = _PARENTS[parent_kind]
    insert = (f"INSERT INTO messages ({', '.join(_MESSAGE_FIELDS)}) SELECT :pk, :id, {written}, :role, :parts, :text,"
              f" :created_at, :metadata, :tokens, {continues} FROM sessions WHERE pk = :pk{known}"
              f"{dialect.row_lock} ON CONFLICT (session_pk, id) DO NOTHING RETURNING parent_id")
    if not dialect.chained_writes:
        return insert
    return (f"WITH added AS ({insert}) UPDATE sessions SET updated_at = :now, latest_message_id = :id FROM added"
            " WHERE pk = :pk RETURNING added.parent_id")


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
        if self.dialect.name_lock:
            with self.transaction() as conn:
                conn.execute(self.dialect.name_lock, {"name": dumps([tenant_id, agent_id, session_id])})

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
            return row[0] if row else self.ensure(tenant_id, agent_id, session_id, metadata)

    def insert_messages(self, rows) -> None:
        """Write ``(session key, message)`` pairs, each message normalized with its ``parent_id`` and
        ``tokens``, in multi-row statements without checking parents; each session's last message
        becomes its newest. For importers, which check the tree themselves; joins their transaction."""
        if not rows:
            return
        latest = {pk: message["id"] for pk, message in rows}
        with self.transaction() as conn:
            insert_rows(conn, "messages", _MESSAGE_FIELDS,
                        ((*message_row(self.dialect, pk, m, m["parent_id"]), continues)
                         for (pk, m), continues in zip(rows, continuations(rows))))
            now = utc_now_iso()
            conn.executemany(_POINT_TO_LATEST, [(now, message_id, pk) for pk, message_id in latest.items()])

    def settle_search(self, written) -> None:
        """After an import that wrote ``written`` messages in multi-row statements, merge what the
        search index buffered for them, so the appends that follow do not pay for it (a backend whose
        index needs no such care does nothing)."""
        merge = self.dialect.search_merge("messages")
        if written >= SETTLE_SEARCH_AFTER and merge is not None:
            with self.transaction() as conn:
                conn.execute(merge)

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
        params.update(limit=self.dialect.no_limit if limit is None else limit, offset=offset)
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

    def keys(self, *, tenant_id=None) -> Sequence[tuple]:
        """``(session_id, tenant_id, agent_id)`` of every session, in ``list``'s order, without the
        counts ``list`` adds: for work that reads each session itself (an audit of every compaction);
        on a store of 500,000 messages those counts took 1.6 s."""
        where, params = self._filters(tenant_id, None, None, None)
        return self._tuples(f"SELECT s.session_id, s.tenant_id, s.agent_id FROM sessions s {where}"
                            " ORDER BY s.updated_at DESC, s.pk DESC", params)

    def count(self, *, tenant_id=None, agent_id=None, search=None) -> int:
        """How many sessions ``list`` would page through with the same filters."""
        where, params = self._filters(tenant_id, agent_id, None, search)
        return self._one(f"SELECT COUNT(*) AS n FROM sessions s {where}", params)["n"]

    def stamp(self) -> tuple:
        """What moves whenever a session, a message or an overlay of the store changes: the session
        count and newest update, the newest message's key (an update's time is in milliseconds, and a
        message can be appended within the one of the change before), the overlay count, id sum (an
        overlay removed and another added) and newest. One cheap read, for a cache of something read
        from every session (the lab's audit of every compaction)."""
        row = self._one("SELECT (SELECT COUNT(*) FROM sessions) AS sessions, (SELECT MAX(updated_at) FROM sessions)"
                        " AS updated, (SELECT MAX(seq) FROM messages) AS message, COUNT(*) AS overlays,"
                        " CAST(COALESCE(SUM(id), 0) AS BIGINT) AS ids, MAX(created_at) AS newest FROM compactions")
        return (row["sessions"], row["updated"], row["message"], row["overlays"], row["ids"], row["newest"])

    def _filters(self, tenant_id, agent_id, session_id, search):
        where, params = [], {}
        for column, value in (("tenant_id", tenant_id), ("agent_id", agent_id), ("session_id", session_id)):
            if value is not None:
                where.append(f"s.{column} = :{column}")
                params[column] = value
        if search:
            title = self.dialect.json_text("s.metadata", "title")
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
                        ((*message_row(self.dialect, pk, m, m["parent_id"]), continues)
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








def _damage_named(read, where=""):
    """``read()``, its DamagedRowError prefixed with ``where`` and told where such rows are listed."""
    try:
        return read()
    except DamagedRowError as error:
        raise DamagedRowError(f"{where}{error}; `memorylab check` lists such rows and `memorylab check "
                              "--repair` sets them aside") from None


class SqlSessionStorage(BranchReads):
    """One session's rows: a tree of messages (each has a parent; the newest is where appends go by
    default), the compaction overlays on it, its status and its context blocks.

    Every write that depends on the tree's shape (append, update, delete, overlays) runs in one
    transaction that locks the session first where the backend needs that (``dialect.row_lock``), so two
    writers of one session take turns and the tree stays valid. Reads skip a damaged message row
    with a ``DamagedRowWarning`` instead of failing for the whole session.
    """

    def __init__(self, store, pk):
        super().__init__(store, pk)
        self.blocks = SessionBlocks(store, pk)

    def __repr__(self):
        return f"<SqlSessionStorage #{self.pk} of {self._store!r}>"

    def _lock(self, conn):
        if self.dialect.row_lock:
            conn.execute(f"SELECT 1 FROM sessions WHERE pk = ?{self.dialect.row_lock}", (self.pk,))

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


    # -- messages -----------------------------------------------------------------------------

    def append(self, message, parent=LATEST_LEAF) -> Message:
        """Store a normalized message (with ``tokens``) under ``parent``; a repeated id is a no-op.

        The statement that writes the message reads its parent from the session row, which it locks where
        the backend needs that, so two processes appending "under the latest leaf" at once still produce a
        valid tree.
        """
        dialect, kind = self.dialect, "latest" if parent is LATEST_LEAF else "root" if parent is None else "given"
        values = message_row(dialect, self.pk, message, None if parent is LATEST_LEAF else parent)
        params = dict(zip(_APPENDED_VALUES, values), now=utc_now_iso())
        if dialect.chained_writes:
            row = self._store.write_one(_append_statement(dialect, kind), params)
        else:
            with self.transaction() as conn:
                row = conn.execute(_append_statement(dialect, kind), params).fetchone()
                if row is not None:
                    conn.execute(_POINT_TO_LATEST, (params["now"], message["id"], self.pk))
        return self._not_appended(message, parent) if row is None else placed(message, row[0])

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
                    message["role"], dumps(message["parts"]), self.dialect.searchable(message_text(message)),
                    message["created_at"], dumps(message["metadata"]), message["tokens"],
                    self.pk, message["id"],
                ),
            )
            conn.execute("UPDATE sessions SET updated_at = ? WHERE pk = ?", (utc_now_iso(), self.pk))
        return placed(message, current["parent_id"])

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
            return cast(Overlay, self.get_overlay(overlay_id))  # written just above, in this transaction

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
        return frozenset(row[0] for row in self._tuples(
            "SELECT message_id FROM message_pins WHERE session_pk = ?", (self.pk,)))

    # -- paged reads -----------------------------------------------------------------------------
    # A long branch or session read a page at a time (``memorylab.history.paged``): first where its
    # rows are (a few seq ranges, or the seqs of a parent walk), then one page of rows per statement.









