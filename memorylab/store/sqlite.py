"""The SQLite store: every SQL statement memorylab runs lives behind this class.

One ``Store`` holds one connection guarded by a re-entrant lock, so Streamlit's script threads can
share it. Several processes can open the same file: WAL lets readers run beside a writer, and every
write starts with ``BEGIN IMMEDIATE`` under a busy timeout, so writers queue instead of failing.
Session logic (``memorylab.session``) calls the narrow methods here and never writes SQL itself,
which keeps a second backend an addition rather than a rewrite.
"""
import json
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path

from ..errors import ConflictError, InvalidInputError, InvalidMessageError, NotFoundError, StoreBusyError
from ..messages import message_text, utc_now_iso
from .context import ContextStorage
from .fts import fts_query
from .integrity import IntegrityStorage
from .longterm import LongTermStorage
from .manager import ManagerStorage
from .schema import migrate

LATEST_LEAF = object()
"""Parent marker for "append under the newest leaf" (the default of ``append_message``)."""

SNIPPET_MARKS = ("\u2983", "\u2984")
"""Brackets around matched words in search snippets (characters rare enough not to clash with text)."""
_MESSAGE_COLUMNS = "id, parent_id, role, parts, created_at, metadata, tokens"
_MAX_DEPTH = 10_000_000


# One encoder for every write: json.dumps with options builds a new JSONEncoder on each call,
# and an append encodes twice (parts and metadata).
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


# Stored JSON is always written compactly by _dumps, so the decoder's outer layers (whitespace
# handling) can be skipped; reading a 10k-message path spends most of its time here.
_decode = json.JSONDecoder().raw_decode


def _load_json(text):
    return {} if text == "{}" else _decode(text)[0]


def _message_from_row(row):
    """A message dict from a row of ``_MESSAGE_COLUMNS`` (unpacked by position: a name lookup on
    sqlite3.Row scans the column names, which made up a quarter of reading a 10k-message path)."""
    message_id, parent_id, role, parts, created_at, metadata, tokens = row
    return {
        "id": message_id,
        "role": role,
        "parts": _load_json(parts),
        "created_at": created_at,
        "metadata": _load_json(metadata),
        "parent_id": parent_id,
        "tokens": tokens,
    }


def _unstorable(error):
    """Python strings may hold half of a UTF-16 surrogate pair; SQLite's UTF-8 text cannot."""
    return InvalidInputError(
        f"text holding an unpaired surrogate ({error.object[error.start:error.end]!r} at position {error.start}) "
        "cannot be stored or looked up in SQLite; nothing was written"
    )


def _compaction_from_row(row):
    return {
        "id": row["id"],
        "from_id": row["from_id"],
        "to_id": row["to_id"],
        "summary": row["summary"],
        "created_at": row["created_at"],
        "metadata": json.loads(row["metadata"]),
    }


class Store(ContextStorage, ManagerStorage, LongTermStorage, IntegrityStorage):
    """A memorylab database: ``Store("lab.db")`` or ``Store(":memory:")``."""

    def __init__(self, path=":memory:", *, timeout=30.0):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(
            self.path, timeout=timeout, check_same_thread=False, isolation_level=None
        )
        self._conn.row_factory = sqlite3.Row
        self._db = None
        try:
            self._set_up()
        except sqlite3.OperationalError as error:
            self._conn.close()
            self._raise_if_locked(error)
            raise

    def _set_up(self):
        """Connection settings and migrations; WAL mode and migrations need the write lock on a new file."""
        self._conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
        self._conn.execute("PRAGMA foreign_keys = ON")
        if self.path != ":memory:":
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            # Up to 64 MiB of pages (SQLite's default is 2 MiB): walking a 10k-message path hops
            # between index and table pages spread over the file, and re-reading them was about a
            # quarter of get_history. The cache only grows as pages are read.
            self._conn.execute("PRAGMA cache_size = -65536")
        with self._lock:
            migrate(self._conn)

    def __repr__(self):
        return f"Store({self.path!r})"

    @property
    def db(self):
        """The file as a ``sqlite_utils.Database`` for inspection (tables, counts, ad-hoc queries).

        Built on first use: sqlite-utils imports pandas when it is installed, which would double
        the time of ``import memorylab``.
        """
        if self._db is None:
            import sqlite_utils

            self._db = sqlite_utils.Database(self._conn)
        return self._db

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        with self._lock:
            self._conn.close()

    @contextmanager
    def transaction(self):
        """A write transaction (``BEGIN IMMEDIATE``); nested calls join the outer one."""
        with self._lock:
            if self._conn.in_transaction:
                yield self._conn
                return
            self._execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except UnicodeEncodeError as error:
                self._conn.execute("ROLLBACK")
                raise _unstorable(error) from None
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextmanager
    def snapshot(self):
        """A read transaction: several SELECTs see one consistent state of the file."""
        with self._lock:
            if self._conn.in_transaction:
                yield self._conn
                return
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")

    def _execute(self, sql, params=()):
        """Run ``BEGIN IMMEDIATE`` or a read, where a lock that outlasted the busy timeout and an
        unstorable string become clear errors."""
        try:
            return self._conn.execute(sql, params)
        except sqlite3.OperationalError as error:
            self._raise_if_locked(error)
            raise
        except UnicodeEncodeError as error:
            raise _unstorable(error) from None

    def _raise_if_locked(self, error):
        """SQLite's busy handler has already retried for ``timeout`` seconds: say so, and what to do."""
        if str(error).startswith("database is locked"):
            raise StoreBusyError(
                f"{self.path} stayed locked by another writer for {self.timeout:g} s (a long import or "
                "compaction, or another process); nothing was changed. Retry when it has finished, or open "
                "the Store with a larger timeout="
            ) from None

    def _one(self, sql, params=()):
        with self._lock:
            return self._execute(sql, params).fetchone()

    def _all(self, sql, params=()):
        with self._lock:
            return self._execute(sql, params).fetchall()

    # -- sessions ---------------------------------------------------------------------------

    def find_session(self, tenant_id, agent_id, session_id):
        """The internal key of a session, or None."""
        row = self._one(
            "SELECT pk FROM sessions WHERE tenant_id = ? AND agent_id = ? AND session_id = ?",
            (tenant_id, agent_id, session_id),
        )
        return row["pk"] if row else None

    def ensure_session(self, tenant_id, agent_id, session_id, metadata=None):
        """The key of a session, created (with ``metadata``) when it does not exist yet."""
        with self.transaction() as conn:
            pk = self.find_session(tenant_id, agent_id, session_id)
            if pk is not None:
                return pk
            now = utc_now_iso()
            self._register_agent_row(conn, tenant_id, agent_id, now)
            return conn.execute(
                "INSERT INTO sessions (tenant_id, agent_id, session_id, created_at, updated_at, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (tenant_id, agent_id, session_id, now, now, _dumps(metadata or {})),
            ).lastrowid

    def session_info(self, pk):
        row = self._one("SELECT * FROM sessions WHERE pk = ?", (pk,))
        if row is None:
            raise NotFoundError(f"session #{pk} no longer exists")
        return {
            "session_id": row["session_id"],
            "tenant_id": row["tenant_id"],
            "agent_id": row["agent_id"],
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            "metadata": json.loads(row["metadata"]),
        }

    def set_session_metadata(self, pk, metadata):
        with self.transaction() as conn:
            conn.execute(
                "UPDATE sessions SET metadata = ?, updated_at = ? WHERE pk = ?",
                (_dumps(metadata), utc_now_iso(), pk),
            )

    def list_sessions(self, *, tenant_id=None, agent_id=None):
        """Every session with its message count, branch (leaf) count and stored token total."""
        where, params = [], []
        for column, value in (("tenant_id", tenant_id), ("agent_id", agent_id)):
            if value is not None:
                where.append(f"s.{column} = ?")
                params.append(value)
        # Leaves = messages - messages that are somebody's parent: two index-only aggregates instead
        # of a child lookup per message (the sidebar runs this on every rerun of every page).
        rows = self._all(
            f"""SELECT s.*, COALESCE(c.n, 0) AS message_count, COALESCE(c.tokens, 0) AS tokens,
                   COALESCE(c.n, 0) - COALESCE(p.parents, 0) AS branch_count
            FROM sessions s
            LEFT JOIN (SELECT session_pk, COUNT(*) AS n, SUM(tokens) AS tokens FROM messages GROUP BY session_pk) c
                ON c.session_pk = s.pk
            LEFT JOIN (SELECT session_pk, COUNT(DISTINCT parent_id) AS parents FROM messages
                       WHERE parent_id IS NOT NULL GROUP BY session_pk) p ON p.session_pk = s.pk
            {"WHERE " + " AND ".join(where) if where else ""}
            ORDER BY s.updated_at DESC, s.pk DESC""",
            params,
        )
        return [
            {
                "session_id": r["session_id"],
                "tenant_id": r["tenant_id"],
                "agent_id": r["agent_id"],
                "created_at": r["created_at"],
                "updated_at": r["updated_at"],
                "message_count": r["message_count"],
                "branch_count": r["branch_count"],
                "tokens": r["tokens"],
                "metadata": json.loads(r["metadata"]),
            }
            for r in rows
        ]

    def delete_session(self, pk):
        with self.transaction() as conn:
            conn.execute("DELETE FROM sessions WHERE pk = ?", (pk,))

    # -- messages -----------------------------------------------------------------------------

    def append_message(self, pk, message, parent=LATEST_LEAF):
        """Store a normalized message (with ``tokens``) under ``parent``; a repeated id is a no-op.

        Parent resolution and the insert share one write transaction, so two processes appending
        "under the latest leaf" at once still produce a valid tree.
        """
        with self.transaction() as conn:
            # One round trip answers both "is this a repeat?" and "which leaf is the newest?".
            exists, latest = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM messages WHERE session_pk = :pk AND id = :id),"
                " (SELECT latest_message_id FROM sessions WHERE pk = :pk)",
                {"pk": pk, "id": message["id"]},
            ).fetchone()
            if exists:
                return self.get_message(pk, message["id"])
            if parent is LATEST_LEAF:
                parent = latest
            elif parent is not None and self.get_message(pk, parent) is None:
                raise NotFoundError(
                    f"parent {parent!r} is not a message of this session; append with parent_id=None "
                    "to start a new root"
                )
            self._insert(conn, pk, message, parent)
            conn.execute(
                "UPDATE sessions SET updated_at = ?, latest_message_id = ? WHERE pk = ?",
                (utc_now_iso(), message["id"], pk),
            )
        return dict(message, parent_id=parent)

    def _insert(self, conn, pk, message, parent_id):
        conn.execute(
            "INSERT INTO messages (session_pk, id, parent_id, role, parts, text, created_at, metadata, tokens)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                pk, message["id"], parent_id, message["role"], _dumps(message["parts"]),
                message_text(message), message["created_at"], _dumps(message["metadata"]),
                message["tokens"],
            ),
        )

    def get_message(self, pk, message_id):
        row = self._one(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_pk = ? AND id = ?", (pk, message_id)
        )
        return _message_from_row(row) if row else None

    def latest_leaf_id(self, pk):
        row = self._one("SELECT latest_message_id FROM sessions WHERE pk = ?", (pk,))
        return row["latest_message_id"] if row else None

    def _reset_latest(self, conn, pk):
        """Recompute the newest message after removals or a bulk write (rare, so a scan is fine)."""
        conn.execute(
            "UPDATE sessions SET latest_message_id = (SELECT id FROM messages WHERE session_pk = :pk"
            " ORDER BY seq DESC LIMIT 1), updated_at = :now WHERE pk = :pk",
            {"pk": pk, "now": utc_now_iso()},
        )

    def _path_cte(self):
        return """WITH RECURSIVE path(seq, parent_id, depth) AS (
                SELECT seq, parent_id, 0 FROM messages WHERE session_pk = :pk AND id = :leaf
                UNION ALL
                SELECT m.seq, m.parent_id, path.depth + 1 FROM messages m JOIN path
                    ON m.session_pk = :pk AND m.id = path.parent_id
                WHERE path.depth < :max_depth
            )"""

    def get_path(self, pk, leaf_id):
        """Messages from the root down to ``leaf_id`` (a recursive walk up the parent links)."""
        rows = self._all(
            f"""{self._path_cte()}
            SELECT {", ".join("m." + c for c in _MESSAGE_COLUMNS.split(", "))}
            FROM path JOIN messages m ON m.seq = path.seq ORDER BY path.depth DESC""",
            {"pk": pk, "leaf": leaf_id, "max_depth": _MAX_DEPTH},
        )
        return [_message_from_row(r) for r in rows]

    def path_stats(self, pk, leaf_id):
        """(length, stored token sum) of the path ending at ``leaf_id``, without loading messages."""
        row = self._one(
            f"""{self._path_cte()}
            SELECT COUNT(*) AS length, COALESCE(SUM(m.tokens), 0) AS tokens
            FROM path JOIN messages m ON m.seq = path.seq""",
            {"pk": pk, "leaf": leaf_id, "max_depth": _MAX_DEPTH},
        )
        return row["length"], row["tokens"]

    def children(self, pk, message_id):
        rows = self._all(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_pk = ? AND parent_id IS ?"
            " ORDER BY seq",
            (pk, message_id),
        )
        return [_message_from_row(r) for r in rows]

    def child_counts(self, pk):
        """{message id: number of children} for every message that has children."""
        rows = self._all(
            "SELECT parent_id, COUNT(*) AS n FROM messages WHERE session_pk = ? AND parent_id IS NOT NULL"
            " GROUP BY parent_id",
            (pk,),
        )
        return {r["parent_id"]: r["n"] for r in rows}

    def newest_leaf_under(self, pk, message_id):
        """The newest leaf of the subtree rooted at ``message_id`` (the message itself if it is a leaf)."""
        row = self._one(
            """WITH RECURSIVE below(id, seq) AS (
                SELECT id, seq FROM messages WHERE session_pk = :pk AND id = :id
                UNION ALL
                SELECT m.id, m.seq FROM messages m JOIN below ON m.session_pk = :pk AND m.parent_id = below.id
            )
            SELECT id FROM below ORDER BY seq DESC LIMIT 1""",
            {"pk": pk, "id": message_id},
        )
        return row["id"] if row else None

    def leaves(self, pk):
        """Every childless message, newest first."""
        rows = self._all(
            f"""SELECT {_MESSAGE_COLUMNS} FROM messages m WHERE session_pk = ? AND NOT EXISTS
                (SELECT 1 FROM messages c WHERE c.session_pk = m.session_pk AND c.parent_id = m.id)
            ORDER BY seq DESC""",
            (pk,),
        )
        return [_message_from_row(r) for r in rows]

    def all_messages(self, pk):
        """Every message of the session in insertion order (parents before children)."""
        rows = self._all(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_pk = ? ORDER BY seq", (pk,)
        )
        return [_message_from_row(r) for r in rows]

    def message_count(self, pk):
        return self._one("SELECT COUNT(*) AS n FROM messages WHERE session_pk = ?", (pk,))["n"]

    def update_message(self, pk, message):
        """Replace role, parts, metadata and tokens of a stored message; its place in the tree stays."""
        with self.transaction() as conn:
            current = self.get_message(pk, message["id"])
            if current is None:
                raise NotFoundError(f"message {message['id']!r} is not in this session")
            conn.execute(
                "UPDATE messages SET role = ?, parts = ?, text = ?, created_at = ?, metadata = ?, tokens = ?"
                " WHERE session_pk = ? AND id = ?",
                (
                    message["role"], _dumps(message["parts"]), message_text(message),
                    message["created_at"], _dumps(message["metadata"]), message["tokens"],
                    pk, message["id"],
                ),
            )
        return dict(message, parent_id=current["parent_id"])

    def delete_messages(self, pk, message_ids):
        """Remove messages, re-attaching their children to their parents (the tree stays connected).

        Overlays that start or end at a removed message can never apply again and go too.
        Returns the number of messages removed.
        """
        removed = 0
        with self.transaction() as conn:
            for message_id in dict.fromkeys(message_ids):
                row = conn.execute(
                    "SELECT parent_id FROM messages WHERE session_pk = ? AND id = ?", (pk, message_id)
                ).fetchone()
                if row is None:
                    continue
                conn.execute(
                    "UPDATE messages SET parent_id = ? WHERE session_pk = ? AND parent_id = ?",
                    (row["parent_id"], pk, message_id),
                )
                conn.execute(
                    "DELETE FROM compactions WHERE session_pk = ? AND (from_id = ? OR to_id = ?)",
                    (pk, message_id, message_id),
                )
                conn.execute("DELETE FROM messages WHERE session_pk = ? AND id = ?", (pk, message_id))
                removed += 1
            self._reset_latest(conn, pk)
        return removed

    def clear_messages(self, pk):
        with self.transaction() as conn:
            conn.execute("DELETE FROM compactions WHERE session_pk = ?", (pk,))
            removed = conn.execute("DELETE FROM messages WHERE session_pk = ?", (pk,)).rowcount
            self._reset_latest(conn, pk)
        return removed

    # -- compaction overlays -------------------------------------------------------------------

    def add_compaction(self, pk, summary, from_id, to_id, metadata=None):
        """Store an overlay; ``from_id`` must be ``to_id`` or one of its ancestors."""
        with self.transaction() as conn:
            if self.get_message(pk, to_id) is None:
                raise NotFoundError(f"to_id {to_id!r} is not a message of this session")
            if from_id not in {m["id"] for m in self.get_path(pk, to_id)}:
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
                (pk, overlay_id, from_id, to_id, summary, utc_now_iso(), _dumps(metadata or {})),
            )
            return self.get_compaction(pk, overlay_id)

    def get_compaction(self, pk, overlay_id):
        row = self._one("SELECT * FROM compactions WHERE session_pk = ? AND id = ?", (pk, overlay_id))
        return _compaction_from_row(row) if row else None

    def compactions(self, pk):
        rows = self._all("SELECT * FROM compactions WHERE session_pk = ? ORDER BY id", (pk,))
        return [_compaction_from_row(r) for r in rows]

    def delete_compaction(self, pk, overlay_id):
        with self.transaction() as conn:
            deleted = conn.execute(
                "DELETE FROM compactions WHERE session_pk = ? AND id = ?", (pk, overlay_id)
            ).rowcount
        if not deleted:
            raise NotFoundError(f"overlay {overlay_id!r} is not in this session")

    # -- search ------------------------------------------------------------------------------

    def search(self, query, *, limit=20, session_pk=None, tenant_id=None, agent_id=None, roles=None):
        """BM25-ranked full-text hits over text parts; any string is safe, an empty one finds nothing.

        Each hit has a ``snippet``: the best-matching fragment with the matched words between
        ``SNIPPET_MARKS``, for highlighting.
        """
        match = fts_query(query)
        if match is None or limit <= 0:
            return []
        where, params = ["messages_fts MATCH ?"], [match]
        for column, value in (("m.session_pk", session_pk), ("s.tenant_id", tenant_id),
                              ("s.agent_id", agent_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if roles:
            where.append(f"m.role IN ({', '.join('?' * len(roles))})")
            params.extend(roles)
        rows = self._all(
            f"""SELECT m.id, m.role, m.text, m.created_at, s.session_id, s.tenant_id, s.agent_id,
                   messages_fts.rank AS rank,
                   snippet(messages_fts, 0, '{SNIPPET_MARKS[0]}', '{SNIPPET_MARKS[1]}', '…', 24) AS snippet
            FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid
            JOIN sessions s ON s.pk = m.session_pk
            WHERE {" AND ".join(where)} ORDER BY messages_fts.rank LIMIT ?""",
            (*params, int(limit)),
        )
        return [
            {
                "id": r["id"], "role": r["role"], "content": r["text"], "created_at": r["created_at"],
                "session_id": r["session_id"], "tenant_id": r["tenant_id"], "agent_id": r["agent_id"],
                "rank": r["rank"], "snippet": r["snippet"],
            }
            for r in rows
        ]

    # -- whole-session import ------------------------------------------------------------------

    def write_session(self, tenant_id, agent_id, session_id, *, created_at, updated_at, metadata,
                      cached_prompt, messages, compactions, context_blocks, replace=False):
        """Write a complete, already validated session in one transaction (all or nothing)."""
        with self.transaction() as conn:
            existing = self.find_session(tenant_id, agent_id, session_id)
            if existing is not None:
                if not replace:
                    raise ConflictError(
                        f"session {session_id!r} already exists for agent {agent_id!r}; "
                        "import it under another id or replace it"
                    )
                conn.execute("DELETE FROM sessions WHERE pk = ?", (existing,))
            self._register_agent_row(conn, tenant_id, agent_id, created_at)
            pk = conn.execute(
                "INSERT INTO sessions (tenant_id, agent_id, session_id, created_at, updated_at, metadata,"
                " cached_prompt) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (tenant_id, agent_id, session_id, created_at, updated_at, _dumps(metadata), cached_prompt),
            ).lastrowid
            for message in messages:
                self._insert(conn, pk, message, message["parent_id"])
            conn.execute("UPDATE sessions SET latest_message_id = ? WHERE pk = ?",
                         (messages[-1]["id"] if messages else None, pk))
            conn.executemany(
                "INSERT INTO compactions (session_pk, id, from_id, to_id, summary, created_at, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (pk, c["id"], c["from_id"], c["to_id"], c["summary"], c["created_at"],
                     _dumps(c.get("metadata") or {}))
                    for c in compactions
                ],
            )
            conn.executemany(
                "INSERT INTO context_blocks (session_pk, label, content, updated_at) VALUES (?, ?, ?, ?)",
                [(pk, b["label"], b["content"], b.get("updated_at") or utc_now_iso()) for b in context_blocks],
            )
        return pk
