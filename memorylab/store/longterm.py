"""SQL for long-term memory: scoped records in a workspace, their keyword search and provenance.

Records arrive already normalized by ``memorylab.memory.longterm``; this layer only stores, filters and ranks.
Scope isolation lives in the WHERE clauses: a query names one scope and, for session memories,
one session, so another session's records cannot reach a candidate list.
"""
from __future__ import annotations

import builtins
import json
from typing import cast

from ..errors import InvalidInputError
from ..messages import utc_now_iso
from ..shapes import MemoryRecord, MemoryRecords
from .compare_and_set import MISSING, check_version, version_of
from .repository import Repository
from .rows import JSON_KINDS, like_literal, read_json, readable

_RECORD_FIELDS = ("summary", "body", "tags", "importance", "scope", "kind", "session_id")
MATCHES = ("words", "prefixes", "substring")
MAX_SUBSTRING_CHARS = 10_000
"""A longer query is not searched as a substring: text that long is no fragment, and SQLite refuses
LIKE patterns over 50,000 bytes."""


def _dumps(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def record_version(row) -> str:
    """The version of a stored record: its editable columns as stored (``MISSING`` for none)."""
    return MISSING if row is None else version_of(*(row[field] for field in _RECORD_FIELDS))


def _record_from_row(row):
    """A record from its row; DamagedRowError when one of its JSON documents cannot be read."""
    where = f"long-term record {row['pk']} (workspace {row['workspace']!r})"
    stored = {column: read_json(row[column], kind, where, column)
              for column, kind in JSON_KINDS["memory_records"].items()}
    return {
        "id": row["pk"], "workspace": row["workspace"], "collection": row["collection"], "kind": row["kind"],
        "scope": row["scope"], "session_id": row["session_id"], "summary": row["summary"],
        "body": stored["body"], "tags": stored["tags"], "importance": row["importance"],
        "provenance": stored["provenance"], "vector_index": stored["vector_index"],
        "created_at": row["created_at"], "updated_at": row["updated_at"], "version": record_version(row),
    }


def _scope_filter(scope, session_id):
    """The WHERE part that confines a query to one scope (and, for session memories, one session)."""
    if scope == "GLOBAL_MEMORY":
        return "r.scope = 'GLOBAL_MEMORY'", {}
    return "r.scope = 'SESSION_MEMORY' AND r.session_id = :session", {"session": session_id}


class LongTermRecords(Repository):
    """The records of every workspace (``memorylab.memory.longterm`` keeps one workspace's view of them)."""

    def insert(self, workspace, records) -> list[MemoryRecord]:
        """Store normalized records in one transaction; returns them as stored, with ids."""
        now = utc_now_iso()
        with self.transaction() as conn:
            ids = [
                conn.execute(
                    "INSERT INTO memory_records (workspace, kind, scope, session_id, summary, body, tags, importance,"
                    " provenance, vector_index, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " RETURNING pk",
                    (workspace, r["kind"], r["scope"], r["session_id"], r["summary"], _dumps(r["body"]),
                     _dumps(r["tags"]), r["importance"], _dumps(r["provenance"]), _dumps(r["vector_index"]),
                     now, now),
                ).fetchone()[0]
                for r in records
            ]
        # Each was just written: only a writer deleting it in between would make its read None.
        return cast("builtins.list[MemoryRecord]", [self.get(workspace, pk) for pk in ids])

    def get(self, workspace, record_id) -> MemoryRecord | None:
        """The record, None when there is none, DamagedRowError when its row is unreadable."""
        row = self._one("SELECT * FROM memory_records WHERE workspace = ? AND pk = ?", (workspace, record_id))
        return _record_from_row(row) if row else None

    def list(self, workspace, *, scope=None, session_id=None) -> MemoryRecords:
        """Records of a workspace, newest change first; ``scope`` and ``session_id`` narrow the list.
        A damaged record is left out with a DamagedRowWarning."""
        where, params = ["workspace = ?"], [workspace]
        for column, value in (("scope", scope), ("session_id", session_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        rows = self._all(
            f"SELECT * FROM memory_records WHERE {' AND '.join(where)} ORDER BY updated_at DESC, pk DESC", params
        )
        return MemoryRecords(readable(rows, _record_from_row))

    def update(self, workspace, record_id, record, *, expected=None) -> MemoryRecord | None:
        """Overwrite the editable fields of a record; returns it as stored, or None when it is not there.
        With ``expected`` (its ``version`` as read), only while it is still at that version; else
        ``StaleWriteError`` with the stored record (None when it was removed)."""
        values = [_dumps(record[f]) if f in ("body", "tags") else record[f] for f in _RECORD_FIELDS]
        with self.transaction() as conn:
            if expected is not None:
                stored = conn.execute("UPDATE memory_records SET updated_at = updated_at WHERE workspace = ? AND pk = ?"
                                      " RETURNING *", (workspace, record_id)).fetchone()  # locks the row
                check_version(f"memory record {record_id}", expected, record_version(stored),
                              stored and _record_from_row(stored))
            changed = conn.execute(
                f"UPDATE memory_records SET {', '.join(f + ' = ?' for f in _RECORD_FIELDS)}, updated_at = ?"
                " WHERE workspace = ? AND pk = ?",
                (*values, utc_now_iso(), workspace, record_id),
            ).rowcount
        return self.get(workspace, record_id) if changed else None

    def delete(self, workspace, record_id) -> bool:
        with self.transaction() as conn:
            return conn.execute(
                "DELETE FROM memory_records WHERE workspace = ? AND pk = ?", (workspace, record_id)
            ).rowcount > 0

    def find_duplicate(self, workspace, scope, session_id, summary) -> int | None:
        """The id of a record of the same scope (and session) with the same summary, ignoring case."""
        scope_sql, params = _scope_filter(scope, session_id)
        row = self._one(
            f"SELECT pk FROM memory_records r WHERE r.workspace = :workspace AND {scope_sql}"
            " AND lower(r.summary) = lower(:summary) ORDER BY r.pk LIMIT 1",
            {"workspace": workspace, "summary": summary, **params},
        )
        return row["pk"] if row else None

    def candidates(self, workspace, scope, session_id, *, query=None, match="words", tags=(),
                   limit=8) -> builtins.list[MemoryRecord]:
        """Records of one scope carrying every one of ``tags``, best first.

        With a ``query``, ``match="words"`` keeps those holding any word of it as a whole word, as
        Agently matches ("pizza", not "pizz"; BM25, the summary weighing most), ``match="prefixes"``
        those holding a word that starts with one ("pizz" finds "pizza", "order" the tag "orders"),
        and ``match="substring"`` those holding the query itself, ignoring case (of ASCII letters
        only, on SQLite), in their summary, body values or tags: a fragment such as "izza" finds
        "pizza". A query with nothing to search for matches nothing, so the caller's fallback decides.
        """
        if match not in MATCHES:
            raise InvalidInputError(f"match must be one of {MATCHES}, got {match!r}")
        scope_sql, params = _scope_filter(scope, session_id)
        where = [f"r.workspace = :workspace AND {scope_sql}"]
        params.update(workspace=workspace, limit=int(limit))
        source, order = "memory_records r", "r.importance DESC, r.updated_at DESC, r.pk DESC"
        if query and match == "substring":
            if len(query) > MAX_SUBSTRING_CHARS:
                return []
            params["fragment"] = f"%{like_literal(self.dialect.searchable(query))}%"
            texts = ("r.summary", self.dialect.json_words("r.body"), self.dialect.json_words("r.tags"))
            where.append("(" + " OR ".join(f"lower({text}) LIKE lower(:fragment) ESCAPE '\\'" for text in texts) + ")")
        elif query:
            found = self.dialect.full_text("memories", query, any_word=True, prefixes=match == "prefixes")
            if found is None:
                return []
            fts, params["match"] = found
            source = fts.source
            where.insert(0, fts.condition)
            order = f"{fts.rank}, {order}"
        for i, tag in enumerate(tags):
            params[f"tag{i}"] = tag
            tag_values = self.dialect.json_values("r.tags", f"t{i}")
            where.append(f"EXISTS (SELECT 1 FROM {tag_values} WHERE t{i}.value = :tag{i})")
        rows = self._all(
            f"SELECT r.* FROM {source} WHERE {' AND '.join(where)} ORDER BY {order} LIMIT :limit", params
        )
        return MemoryRecords(readable(rows, _record_from_row))

    def tags(self, workspace, session_id, *, limit=50) -> builtins.list[str]:
        """The tags a session can retrieve by (global ones and its own), most used first."""
        rows = self._all(
            f"""SELECT t.value AS tag FROM memory_records r, {self.dialect.json_values('r.tags', 't')}
            WHERE r.workspace = ? AND (r.scope = 'GLOBAL_MEMORY' OR r.session_id = ?)
            GROUP BY t.value ORDER BY COUNT(*) DESC, t.value LIMIT ?""",
            (workspace, session_id, int(limit)),
        )
        return [r["tag"] for r in rows]

    def locate_turn(self, session_id, user_text, assistant_text) -> dict | None:
        """Where a chat turn is stored: the newest assistant message of a session called ``session_id``
        with this text whose parent is a user message with that text.

        Returns ``{"message_ids": [user, assistant], "turn_index", "tenant_id", "agent_id"}`` or None;
        ``turn_index`` numbers the user message among its session's user messages (1-based, in the
        order they were written). This is how a turn reported by text alone gets provenance that
        leads back to its messages.
        """
        row = self._one(
            """SELECT u.id AS user_id, a.id AS assistant_id, s.tenant_id, s.agent_id,
                (SELECT COUNT(*) FROM messages p WHERE p.session_pk = u.session_pk AND p.role = 'user'
                    AND p.seq <= u.seq) AS turn_index
            FROM sessions s JOIN messages a ON a.session_pk = s.pk
            JOIN messages u ON u.session_pk = a.session_pk AND u.id = a.parent_id
            WHERE s.session_id = ? AND a.role = 'assistant' AND a.text = ? AND u.role = 'user' AND u.text = ?
            ORDER BY a.seq DESC LIMIT 1""",
            (session_id, self.dialect.searchable(assistant_text), self.dialect.searchable(user_text)),
        )
        if row is None:
            return None
        return {"message_ids": [row["user_id"], row["assistant_id"]], "turn_index": row["turn_index"],
                "tenant_id": row["tenant_id"], "agent_id": row["agent_id"]}
