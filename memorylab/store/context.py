"""Context memory: one session's stored blocks, frozen prompt and active skills, and the keyed
entries that searchable blocks index (shared by a tenant's sessions, by namespace)."""
from __future__ import annotations

import builtins

from ..messages import utc_now_iso
from .compare_and_set import check_version, version_of
from .repository import Repository

_SET_BLOCK = "INSERT INTO context_blocks (session_pk, label, content, updated_at) VALUES (?, ?, ?, ?)"
_REPLACE_BLOCK = (" ON CONFLICT (session_pk, label) DO UPDATE SET content = excluded.content,"
                  " updated_at = excluded.updated_at")


def text_version(text) -> str:
    """The version of a block's text; an unstored block reads as empty text, so they share one."""
    return version_of(text or "")


class SessionBlocks(Repository):
    """The context rows of one session: block contents (the writable blocks stored in the database),
    the frozen system prompt, and which skills of each skills block are active."""

    def __init__(self, store, pk):
        super().__init__(store)
        self.pk = pk

    def all(self) -> list[dict]:
        """Every stored block content of the session (for exports)."""
        rows = self._all(
            "SELECT label, content, updated_at FROM context_blocks WHERE session_pk = ? ORDER BY label",
            (self.pk,),
        )
        return [dict(r) for r in rows]

    def content(self, label) -> str | None:
        row = self._one("SELECT content FROM context_blocks WHERE session_pk = ? AND label = ?", (self.pk, label))
        return row["content"] if row else None

    def set_content(self, label, content, *, expected=None) -> None:
        """Store a block's text. With ``expected`` (a ``text_version`` of what was read), only while the
        stored text is still at that version; else ``StaleWriteError`` with the stored text."""
        with self.transaction() as conn:
            if expected is None:
                conn.execute(_SET_BLOCK + _REPLACE_BLOCK, (self.pk, label, content, utc_now_iso()))
                return
            stored = self._locked_content(conn, label)
            check_version(f"block {label!r}", expected, text_version(stored), stored)
            if stored is None:
                created = conn.execute(_SET_BLOCK + " ON CONFLICT DO NOTHING", (self.pk, label, content, utc_now_iso()))
                if created.rowcount:
                    return
                stored = self._locked_content(conn, label)  # another writer created it meanwhile
                check_version(f"block {label!r}", expected, text_version(stored), stored)
            conn.execute("UPDATE context_blocks SET content = ?, updated_at = ? WHERE session_pk = ? AND label = ?",
                         (content, utc_now_iso(), self.pk, label))

    def _locked_content(self, conn, label):
        """The stored text of a block, its row locked until the transaction ends (PostgreSQL; SQLite's
        write transaction holds the whole file already). None when no row is stored."""
        row = conn.execute("UPDATE context_blocks SET updated_at = updated_at WHERE session_pk = ? AND label = ?"
                           " RETURNING content", (self.pk, label)).fetchone()
        return row["content"] if row else None

    def frozen_prompt(self) -> str | None:
        """The frozen system prompt, kept in the column ``cached_prompt`` (its name since migration 3)."""
        row = self._one("SELECT cached_prompt FROM sessions WHERE pk = ?", (self.pk,))
        return row["cached_prompt"] if row else None

    def set_frozen_prompt(self, prompt) -> None:
        with self.transaction() as conn:
            conn.execute("UPDATE sessions SET cached_prompt = ? WHERE pk = ?", (prompt, self.pk))

    def active_skills(self, label) -> list[str]:
        rows = self._all(
            "SELECT key FROM skill_activations WHERE session_pk = ? AND label = ? ORDER BY activated_at, key",
            (self.pk, label),
        )
        return [r["key"] for r in rows]

    def set_skill_active(self, label, key, active) -> None:
        with self.transaction() as conn:
            if active:
                conn.execute(
                    "INSERT INTO skill_activations (session_pk, label, key, activated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (self.pk, label, key, utc_now_iso()),
                )
            else:
                conn.execute(
                    "DELETE FROM skill_activations WHERE session_pk = ? AND label = ? AND key = ?",
                    (self.pk, label, key),
                )


class SearchEntries(Repository):
    """Keyed entries indexed for full-text search, per tenant and namespace."""

    def put(self, tenant_id, namespace, key, content) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO search_entries (tenant_id, namespace, key, content, updated_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (tenant_id, namespace, key) DO UPDATE SET content = excluded.content,"
                " updated_at = excluded.updated_at",
                (tenant_id, namespace, key, content, utc_now_iso()),
            )

    def delete(self, tenant_id, namespace, key) -> bool:
        with self.transaction() as conn:
            return conn.execute(
                "DELETE FROM search_entries WHERE tenant_id = ? AND namespace = ? AND key = ?",
                (tenant_id, namespace, key),
            ).rowcount > 0

    def count(self, tenant_id, namespace) -> int:
        return self._one(
            "SELECT COUNT(*) AS n FROM search_entries WHERE tenant_id = ? AND namespace = ?",
            (tenant_id, namespace),
        )["n"]

    def list(self, tenant_id, namespace) -> list[dict]:
        rows = self._all(
            "SELECT key, content, updated_at FROM search_entries WHERE tenant_id = ? AND namespace = ?"
            " ORDER BY key",
            (tenant_id, namespace),
        )
        return [dict(r) for r in rows]

    def search(self, tenant_id, namespace, query, limit=5) -> builtins.list[dict]:
        """Ranked entries matching ``query`` (any string is safe)."""
        found = self.dialect.full_text("entries", query)
        if found is None or limit <= 0:
            return []
        fts, match = found
        rows = self._all(
            f"""SELECT e.key, e.content, e.updated_at FROM {fts.source}
            WHERE {fts.condition} AND e.tenant_id = :tenant AND e.namespace = :ns
            ORDER BY {fts.rank}, e.key LIMIT :limit""",
            {"match": match, "tenant": tenant_id, "ns": namespace, "limit": int(limit)},
        )
        return [dict(r) for r in rows]
