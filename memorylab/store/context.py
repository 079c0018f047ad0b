"""SQL for context memory: per-session block contents, frozen prompts, search entries, active skills.

A mixin of ``Store``; it relies on the store's ``transaction``, ``_one``, ``_all`` and ``_full_text``.
"""
from ..messages import utc_now_iso


class ContextStorage:
    # -- block contents (the auto-wired writable provider) ------------------------------------

    def context_blocks(self, pk):
        """Every stored block content of a session (for exports)."""
        rows = self._all(
            "SELECT label, content, updated_at FROM context_blocks WHERE session_pk = ? ORDER BY label",
            (pk,),
        )
        return [dict(r) for r in rows]

    def block_content(self, pk, label):
        row = self._one("SELECT content FROM context_blocks WHERE session_pk = ? AND label = ?", (pk, label))
        return row["content"] if row else None

    def set_block_content(self, pk, label, content):
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO context_blocks (session_pk, label, content, updated_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (session_pk, label) DO UPDATE SET content = excluded.content,"
                " updated_at = excluded.updated_at",
                (pk, label, content, utc_now_iso()),
            )

    # -- frozen system prompt ------------------------------------------------------------------

    def cached_prompt(self, pk):
        row = self._one("SELECT cached_prompt FROM sessions WHERE pk = ?", (pk,))
        return row["cached_prompt"] if row else None

    def set_cached_prompt(self, pk, prompt):
        with self.transaction() as conn:
            conn.execute("UPDATE sessions SET cached_prompt = ? WHERE pk = ?", (prompt, pk))

    # -- keyed search entries ------------------------------------------------------------------

    def put_entry(self, tenant_id, namespace, key, content):
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO search_entries (tenant_id, namespace, key, content, updated_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (tenant_id, namespace, key) DO UPDATE SET content = excluded.content,"
                " updated_at = excluded.updated_at",
                (tenant_id, namespace, key, content, utc_now_iso()),
            )

    def delete_entry(self, tenant_id, namespace, key):
        with self.transaction() as conn:
            return conn.execute(
                "DELETE FROM search_entries WHERE tenant_id = ? AND namespace = ? AND key = ?",
                (tenant_id, namespace, key),
            ).rowcount > 0

    def entry_count(self, tenant_id, namespace):
        return self._one(
            "SELECT COUNT(*) AS n FROM search_entries WHERE tenant_id = ? AND namespace = ?",
            (tenant_id, namespace),
        )["n"]

    def entries(self, tenant_id, namespace):
        rows = self._all(
            "SELECT key, content, updated_at FROM search_entries WHERE tenant_id = ? AND namespace = ?"
            " ORDER BY key",
            (tenant_id, namespace),
        )
        return [dict(r) for r in rows]

    def search_entries(self, tenant_id, namespace, query, limit=5):
        """Ranked entries matching ``query`` (any string is safe)."""
        found = self._full_text("entries", query)
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

    # -- active skills -------------------------------------------------------------------------

    def active_skills(self, pk, label):
        rows = self._all(
            "SELECT key FROM skill_activations WHERE session_pk = ? AND label = ? ORDER BY activated_at, key",
            (pk, label),
        )
        return [r["key"] for r in rows]

    def set_skill_active(self, pk, label, key, active):
        with self.transaction() as conn:
            if active:
                conn.execute(
                    "INSERT INTO skill_activations (session_pk, label, key, activated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (pk, label, key, utc_now_iso()),
                )
            else:
                conn.execute(
                    "DELETE FROM skill_activations WHERE session_pk = ? AND label = ? AND key = ?",
                    (pk, label, key),
                )
