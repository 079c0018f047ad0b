"""Agents and their memories: the registry of a tenant's agents, and the memory manager's listing
of an agent's sessions (status, last interaction, newest summary).

Dates that may come from imports or users are compared as instants (the backend's ``_instant``)
rather than as text, because ``...03Z`` and ``...03.000Z`` name the same instant but do not sort as
the same string.
"""
from __future__ import annotations

import builtins

from ..errors import ConflictError, InvalidInputError
from .repository import Repository

ANY_STATUS = object()
"""``memories(status=...)`` default: no status filter (``None`` selects memories in progress)."""

_DATE_COLUMNS = {"updated_at": "s.updated_at", "created_at": "s.created_at"}


def _agent_from_row(row):
    return {"agent_id": row["agent_id"], "name": row["name"], "slug": row["slug"], "created_at": row["created_at"]}


def register_agent_row(conn, tenant_id, agent_id, created_at):
    """Called inside every session-creating transaction: an agent exists once a session used it."""
    conn.execute(
        "INSERT INTO agents (tenant_id, agent_id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
        (tenant_id, agent_id, created_at),
    )


class AgentDirectory(Repository):
    def register(self, tenant_id, agent_id, *, created_at, name=None, name_key=None, slug=None) -> dict:
        """Create the agent or update the name and slug given (None keeps the current one)."""
        with self.transaction() as conn:
            if slug is not None:
                taken = conn.execute(
                    "SELECT agent_id FROM agents WHERE tenant_id = ? AND agent_id != ? AND (slug = ? OR agent_id = ?)",
                    (tenant_id, agent_id, slug, slug),
                ).fetchone()
                if taken is not None:
                    raise ConflictError(
                        f"slug {slug!r} already names agent {taken['agent_id']!r}; choose another slug"
                    )
            conn.execute(
                "INSERT INTO agents (tenant_id, agent_id, name, name_key, slug, created_at) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (tenant_id, agent_id) DO UPDATE SET name = COALESCE(excluded.name, agents.name),"
                " name_key = COALESCE(excluded.name_key, agents.name_key), slug = COALESCE(excluded.slug, agents.slug)",
                (tenant_id, agent_id, name, name_key, slug, created_at),
            )
            row = conn.execute(
                "SELECT * FROM agents WHERE tenant_id = ? AND agent_id = ?", (tenant_id, agent_id)
            ).fetchone()
        return _agent_from_row(row)

    def find(self, tenant_id, reference, name_key) -> list[dict]:
        """Agents of the tenant whose id or slug is ``reference`` or whose name folds to ``name_key``,
        best match first; each row says how it matched (``"id"``, ``"slug"`` or ``"name"``)."""
        rows = self._all(
            """SELECT *, CASE WHEN agent_id = :ref THEN 'id' WHEN slug = :ref THEN 'slug' ELSE 'name' END
                   AS matched_by
            FROM agents WHERE tenant_id = :tenant AND (agent_id = :ref OR slug = :ref OR name_key = :key)
            ORDER BY CASE WHEN agent_id = :ref THEN 0 WHEN slug = :ref THEN 1 ELSE 2 END, agent_id""",
            {"tenant": tenant_id, "ref": reference, "key": name_key},
        )
        return [dict(_agent_from_row(r), matched_by=r["matched_by"]) for r in rows]

    def list(self, tenant_id, *, busiest_first=False, limit=None, offset=0) -> list[dict]:
        """A tenant's agents with their number of sessions, by id (or most sessions first), paged in
        SQL by ``limit`` (None: all) and ``offset``."""
        order = "session_count DESC, a.agent_id" if busiest_first else "a.agent_id"
        rows = self._all(
            f"""SELECT a.*, COUNT(s.pk) AS session_count FROM agents a
            LEFT JOIN sessions s ON s.tenant_id = a.tenant_id AND s.agent_id = a.agent_id
            WHERE a.tenant_id = :tenant GROUP BY a.tenant_id, a.agent_id ORDER BY {order}
            LIMIT :limit OFFSET :offset""",
            {"tenant": tenant_id, "limit": self.dialect.no_limit if limit is None else limit, "offset": offset},
        )
        return [dict(_agent_from_row(r), session_count=r["session_count"]) for r in rows]

    def count(self, tenant_id) -> int:
        """How many agents ``list`` pages through."""
        return self._one("SELECT COUNT(*) AS n FROM agents WHERE tenant_id = ?", (tenant_id,))["n"]

    def tenants(self) -> builtins.list[str]:
        """Every tenant that has an agent (so every tenant with a session), sorted: one index scan,
        where collecting them from the session listing reads every session."""
        return [r["tenant_id"] for r in self._all("SELECT DISTINCT tenant_id FROM agents ORDER BY tenant_id")]

    # -- memory status and listing ---------------------------------------------------------------

    def memories(self, tenant_id, agent_id, *, interaction_before=None, status=ANY_STATUS, date_from=None,
                      date_field="updated_at", limit=20, offset=0) -> builtins.list[dict]:
        """One agent's sessions, most recently updated first, each with its status, message count,
        newest summary and newest message.

        The last interaction is the newest message's timestamp (the session's creation when it has
        none), so a summary or a status change made later does not make a quiet session look active.
        """
        if date_field not in _DATE_COLUMNS:
            raise InvalidInputError(f"date_field must be one of {', '.join(_DATE_COLUMNS)}, got {date_field!r}")
        where = ["s.tenant_id = :tenant", "s.agent_id = :agent"]
        if interaction_before is not None:
            instant = self.dialect.instant
            where.append(f"{instant('COALESCE(m.created_at, s.created_at)')} < {instant(':before')}")
        if status is None:
            where.append("s.status IS NULL")
        elif status is not ANY_STATUS:
            where.append("s.status = :status")
        if date_from is not None:
            where.append(f"{self.dialect.instant(_DATE_COLUMNS[date_field])} >= {self.dialect.instant(':date_from')}")
        rows = self._all(
            f"""SELECT s.session_id, s.status, s.created_at, s.updated_at,
                (SELECT COUNT(*) FROM messages c WHERE c.session_pk = s.pk) AS message_count,
                (SELECT summary FROM compactions o WHERE o.session_pk = s.pk ORDER BY o.id DESC LIMIT 1)
                    AS summary,
                m.role AS last_role, m.text AS last_text, m.created_at AS last_at
            FROM sessions s LEFT JOIN messages m ON m.session_pk = s.pk AND m.id = s.latest_message_id
            WHERE {" AND ".join(where)}
            ORDER BY {self.dialect.instant('s.updated_at')} DESC, s.pk DESC LIMIT :limit OFFSET :offset""",
            {"tenant": tenant_id, "agent": agent_id, "before": interaction_before, "status": status,
             "date_from": date_from, "limit": limit, "offset": offset},
        )
        return [
            {
                "session_id": r["session_id"], "status": r["status"], "created_at": r["created_at"],
                "updated_at": r["updated_at"], "message_count": r["message_count"], "summary": r["summary"],
                "last_message": None if r["last_role"] is None else
                {"role": r["last_role"], "content": r["last_text"], "timestamp": r["last_at"]},
            }
            for r in rows
        ]
