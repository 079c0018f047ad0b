"""The storage contract every backend fulfils, and the SQL they share.

``Store(target)`` opens a backend chosen by ``target``: a ``postgresql://`` URL gives a
``PostgresStore``, anything else a ``SQLiteStore`` file (``":memory:"`` included). The methods here
are written once in the SQL both engines speak (``?``/``:name`` parameters, ``RETURNING``,
``ON CONFLICT``, recursive CTEs); each backend adds its connection handling, its full-text search
and the few expressions that differ, as the small hooks at the top of the class. Session logic
(``memorylab.session``) calls these narrow methods and never writes SQL itself.
"""
import json
import warnings

from ..errors import (
    ConflictError,
    DamagedRowError,
    DamagedRowWarning,
    InvalidInputError,
    InvalidMessageError,
    MemoryLabError,
    NotFoundError,
)
from ..messages import check_identifier, message_text, utc_now_iso
from .bulk import BulkStorage
from .context import ContextStorage
from .integrity import IntegrityStorage
from .longterm import LongTermStorage
from .manager import ManagerStorage
from .rows import MESSAGE_COLUMNS, message_from_row

LATEST_LEAF = object()
"""Parent marker for "append under the newest leaf" (the default of ``append_message``)."""

ALL_TENANTS = object()
"""``tenant_id`` of a ``search`` over every tenant (the lab's admin view). Never a default: a search
names its tenant, so no caller crosses tenants by leaving it out."""

SNIPPET_MARKS = ("\u2983", "\u2984")
"""Brackets around matched words in search snippets (characters rare enough not to clash with text)."""
_MAX_DEPTH = 10_000_000
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target):
    return isinstance(target, str) and target.startswith(POSTGRES_SCHEMES)


# One encoder for every write: json.dumps with options builds a new JSONEncoder on each call,
# and an append encodes twice (parts and metadata).
dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def unstorable(error, engine):
    """Python strings may hold half of a UTF-16 surrogate pair; a database's UTF-8 text cannot."""
    return InvalidInputError(
        f"text holding an unpaired surrogate ({error.object[error.start:error.end]!r} at position {error.start}) "
        f"cannot be stored or looked up in {engine}; nothing was written"
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


class Store(ContextStorage, ManagerStorage, LongTermStorage, IntegrityStorage, BulkStorage):
    """A memorylab database: ``Store("lab.db")``, ``Store(":memory:")`` or
    ``Store("postgresql://user@host/db")``."""

    FOR_UPDATE = ""
    """Appended to the read that starts a session write: where writers do not queue for the whole
    database (PostgreSQL), it locks the session row so its appends and overlays happen one at a time."""

    def __new__(cls, target=":memory:", **options):
        if cls is Store:
            if is_postgres_url(target):
                try:
                    from .postgres import PostgresStore as cls
                except ImportError as error:
                    raise MemoryLabError(f"a PostgreSQL store needs psycopg 3 and its pool ({error}): "
                                         "pip install 'memorylab[postgres]'") from None
            else:
                from .sqlite import SQLiteStore as cls
        return super().__new__(cls)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"{type(self).__name__}({self.path!r})"

    # -- what each backend provides ------------------------------------------------------------
    # transaction() / snapshot(): context managers yielding a connection with execute/executemany;
    # _one / _all: single reads; close(); path (safe to show); SEARCH_ENGINE and SEARCH_DESCRIPTION;
    # _full_text(kind, query) for search; the expressions _instant, _json_values, _json_words,
    # _glob and _glob_pattern; NO_LIMIT. It may override _searchable, _insert_as_latest and FOR_UPDATE.

    def _searchable(self, text):
        """The copy of a message's text that search indexes (a backend may have to adapt it)."""
        return text

    def _lock_session(self, conn, pk):
        if self.FOR_UPDATE:
            conn.execute(f"SELECT 1 FROM sessions WHERE pk = ?{self.FOR_UPDATE}", (pk,))

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
            # A writer that does not hold the whole database may lose the race to create it.
            row = conn.execute(
                "INSERT INTO sessions (tenant_id, agent_id, session_id, created_at, updated_at, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, agent_id, session_id) DO NOTHING RETURNING pk",
                (tenant_id, agent_id, session_id, now, now, dumps(metadata or {})),
            ).fetchone()
            return row[0] if row else self.find_session(tenant_id, agent_id, session_id)

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
                (dumps(metadata), utc_now_iso(), pk),
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
            f"""SELECT s.*, COALESCE(c.n, 0) AS message_count, CAST(COALESCE(c.tokens, 0) AS BIGINT) AS tokens,
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
            # One round trip answers both "is this a repeat?" and "which leaf is the newest?", and
            # locks the session row where the backend needs that.
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM messages WHERE session_pk = :pk AND id = :id), latest_message_id"
                f" FROM sessions WHERE pk = :pk{self.FOR_UPDATE}",
                {"pk": pk, "id": message["id"]},
            ).fetchone()
            if row is None:
                raise NotFoundError(f"session #{pk} no longer exists")
            exists, latest = row
            if exists:
                return self.get_message(pk, message["id"])
            if parent is LATEST_LEAF:
                parent = latest
            elif parent is not None and conn.execute(
                    "SELECT 1 FROM messages WHERE session_pk = ? AND id = ?", (pk, parent)).fetchone() is None:
                raise NotFoundError(
                    f"parent {parent!r} is not a message of this session; append with parent_id=None "
                    "to start a new root"
                )
            self._insert_as_latest(conn, pk, message, parent)
        return dict(message, parent_id=parent)

    _INSERT_MESSAGE = ("INSERT INTO messages (session_pk, id, parent_id, role, parts, text, created_at, metadata,"
                       " tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")

    def _message_row(self, pk, message, parent_id):
        return (
            pk, message["id"], parent_id, message["role"], dumps(message["parts"]),
            self._searchable(message_text(message)), message["created_at"], dumps(message["metadata"]),
            message["tokens"],
        )

    _POINT_TO_LATEST = "UPDATE sessions SET updated_at = ?, latest_message_id = ? WHERE pk = ?"

    def _insert_as_latest(self, conn, pk, message, parent_id):
        """Write the message and make it the session's newest (two statements here; one round trip
        where a backend can chain them)."""
        conn.execute(self._INSERT_MESSAGE, self._message_row(pk, message, parent_id))
        conn.execute(self._POINT_TO_LATEST, (utc_now_iso(), message["id"], pk))

    def get_message(self, pk, message_id):
        """The stored message, None when there is none, DamagedRowError when its row is unreadable."""
        row = self._one(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_pk = ? AND id = ?", (pk, message_id)
        )
        try:
            return message_from_row(row) if row else None
        except DamagedRowError as error:
            raise DamagedRowError(f"{self._session_name(pk)}, {error}; `memorylab check` lists such rows") from None

    def _messages(self, pk, rows):
        """Messages of session ``pk`` from rows of ``MESSAGE_COLUMNS``. A damaged row is left out with
        a DamagedRowWarning naming it, so one bad row does not hide the rest of the session."""
        try:
            return [message_from_row(row) for row in rows]
        except DamagedRowError:
            return self._readable_messages(pk, rows)

    def _readable_messages(self, pk, rows):
        messages = []
        for row in rows:
            try:
                messages.append(message_from_row(row))
            except DamagedRowError as error:
                warnings.warn(f"{self._session_name(pk)}: skipped {error}; `memorylab check` lists such rows",
                              DamagedRowWarning, stacklevel=5)
        return messages

    def _session_name(self, pk):
        row = self._one("SELECT session_id FROM sessions WHERE pk = ?", (pk,))
        return f"session {row['session_id']!r}" if row else f"session #{pk}"

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
            SELECT {", ".join("m." + c for c in MESSAGE_COLUMNS.split(", "))}
            FROM path JOIN messages m ON m.seq = path.seq ORDER BY path.depth DESC""",
            {"pk": pk, "leaf": leaf_id, "max_depth": _MAX_DEPTH},
        )
        return self._messages(pk, rows)

    def path_stats(self, pk, leaf_id):
        """(length, stored token sum) of the path ending at ``leaf_id``, without loading messages."""
        row = self._one(
            f"""{self._path_cte()}
            SELECT COUNT(*) AS length, CAST(COALESCE(SUM(m.tokens), 0) AS BIGINT) AS tokens
            FROM path JOIN messages m ON m.seq = path.seq""",
            {"pk": pk, "leaf": leaf_id, "max_depth": _MAX_DEPTH},
        )
        return row["length"], row["tokens"]

    def children(self, pk, message_id):
        # Two spellings rather than "IS ?": PostgreSQL's IS NOT DISTINCT FROM cannot use an index.
        parent = "parent_id IS NULL" if message_id is None else "parent_id = ?"
        rows = self._all(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_pk = ? AND {parent} ORDER BY seq",
            (pk,) if message_id is None else (pk, message_id),
        )
        return self._messages(pk, rows)

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
            f"""SELECT {MESSAGE_COLUMNS} FROM messages m WHERE session_pk = ? AND NOT EXISTS
                (SELECT 1 FROM messages c WHERE c.session_pk = m.session_pk AND c.parent_id = m.id)
            ORDER BY seq DESC""",
            (pk,),
        )
        return self._messages(pk, rows)

    def all_messages(self, pk):
        """Every message of the session in insertion order (parents before children)."""
        rows = self._all(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_pk = ? ORDER BY seq", (pk,)
        )
        return self._messages(pk, rows)

    def message_count(self, pk):
        return self._one("SELECT COUNT(*) AS n FROM messages WHERE session_pk = ?", (pk,))["n"]

    def update_message(self, pk, message):
        """Replace role, parts, metadata and tokens of a stored message; its place in the tree stays."""
        with self.transaction() as conn:
            self._lock_session(conn, pk)
            current = self.get_message(pk, message["id"])
            if current is None:
                raise NotFoundError(f"message {message['id']!r} is not in this session")
            conn.execute(
                "UPDATE messages SET role = ?, parts = ?, text = ?, created_at = ?, metadata = ?, tokens = ?"
                " WHERE session_pk = ? AND id = ?",
                (
                    message["role"], dumps(message["parts"]), self._searchable(message_text(message)),
                    message["created_at"], dumps(message["metadata"]), message["tokens"],
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
            self._lock_session(conn, pk)
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
            self._lock_session(conn, pk)
            conn.execute("DELETE FROM compactions WHERE session_pk = ?", (pk,))
            conn.execute("DELETE FROM skill_activations WHERE session_pk = ?", (pk,))
            removed = conn.execute("DELETE FROM messages WHERE session_pk = ?", (pk,)).rowcount
            self._reset_latest(conn, pk)
        return removed

    # -- compaction overlays -------------------------------------------------------------------

    def add_compaction(self, pk, summary, from_id, to_id, metadata=None):
        """Store an overlay; ``from_id`` must be ``to_id`` or one of its ancestors."""
        with self.transaction() as conn:
            self._lock_session(conn, pk)
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
                (pk, overlay_id, from_id, to_id, summary, utc_now_iso(), dumps(metadata or {})),
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

    def search(self, query, *, tenant_id, limit=20, session_pk=None, agent_id=None, roles=None):
        """Ranked full-text hits over text parts of ``tenant_id`` (or ``ALL_TENANTS``); any string is
        safe, an empty one finds nothing.

        Each hit has a ``snippet``: the best-matching fragment with the matched words between
        ``SNIPPET_MARKS``, for highlighting.
        """
        if tenant_id is ALL_TENANTS:
            tenant_id = None
        elif tenant_id is None:
            raise InvalidInputError("tenant_id is None: name the tenant to search, or pass ALL_TENANTS to "
                                    "search every tenant")
        else:
            check_identifier(tenant_id, "tenant id")
        found = self._full_text("messages", query)
        if found is None or limit <= 0:
            return []
        fts, match = found
        where, params = [fts.condition], {"match": match, "limit": int(limit)}
        for column, key, value in (("m.session_pk", "pk", session_pk), ("s.tenant_id", "tenant", tenant_id),
                                   ("s.agent_id", "agent", agent_id)):
            if value is not None:
                where.append(f"{column} = :{key}")
                params[key] = value
        if roles:
            params.update({f"role{i}": role for i, role in enumerate(roles)})
            where.append(f"m.role IN ({', '.join(f':role{i}' for i in range(len(roles)))})")
        rows = self._all(
            f"""SELECT m.id, m.role, m.text, m.created_at, s.session_id, s.tenant_id, s.agent_id,
                   {fts.rank} AS rank, {fts.snippet} AS snippet
            FROM {fts.source} JOIN sessions s ON s.pk = m.session_pk
            WHERE {" AND ".join(where)} ORDER BY rank, m.seq LIMIT :limit""",
            params,
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
                " cached_prompt) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING pk",
                (tenant_id, agent_id, session_id, created_at, updated_at, dumps(metadata), cached_prompt),
            ).fetchone()[0]
            conn.executemany(self._INSERT_MESSAGE, (self._message_row(pk, m, m["parent_id"]) for m in messages))
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
                "INSERT INTO context_blocks (session_pk, label, content, updated_at) VALUES (?, ?, ?, ?)",
                [(pk, b["label"], b["content"], b.get("updated_at") or utc_now_iso()) for b in context_blocks],
            )
        return pk
