"""Setting damaged rows aside: what ``memorylab check --repair`` does with a row reads cannot use.

Nothing is deleted. The whole row, as stored, goes into the ``quarantine`` table (``schema.QUARANTINE``)
with its table, its key and the reason, and then:

- a row other rows belong to (a session, an experiment) stays where it is, its unreadable documents
  reset to what the engine writes when there is nothing (``{}``), so its messages or runs stay;
- a message leaves its session as ``delete_messages`` removes one: its children hang under its
  parent, and the overlays and pins that name it are set aside with it;
- any other row leaves its table.
"""
from __future__ import annotations

from ..messages import utc_now_iso
from . import schema
from .bulk import table_columns
from .repository import Repository
from .rows import JSON_KINDS, dumps, json_problem, row_problem, session_name

_TABLES = {table.name: table for table in schema.TABLES}
OWNERS = {column.references.split("(")[0] for table in schema.TABLES for column in table.columns if column.references}
"""The tables whose rows other rows belong to (their deletion would cascade): sessions, experiments."""


def _text(value):
    """A stored value as JSON can hold it: bytes (a BLOB written behind the engine's back) as hex."""
    return {"hex": value.hex()} if isinstance(value, (bytes, bytearray, memoryview)) else value


def _where(key):
    return " AND ".join(f"{column} = ?" for column in key), tuple(key.values())


class Quarantine(Repository):
    def set_aside(self, table, key, reason) -> dict | None:
        """Set the row of ``table`` with primary key ``key`` (a dict) aside because of ``reason``, in one
        transaction that first reads it again, locked, so that a row rewritten since it was found damaged
        stays as it was rewritten. Returns what was done: ``{"quarantined": [pk, ...], "reset": [column,
        ...], "children": n, "new_parent": id, "overlays": n, "pins": n}`` (the last four for a message),
        or None when the row is gone or reads again."""
        with self.transaction() as conn:
            row = self._stored(conn, table, key)
            if row is None or row_problem(table, row) is None:
                return None
            done = {"quarantined": [self._keep(conn, table, key, row, reason)], "reset": []}
            if table in OWNERS:
                done["reset"] = self._reset_unreadable(conn, table, key, row)
            elif table == "messages":
                done.update(self._detach_message(conn, row))
            else:
                where, values = _where(key)
                conn.execute(f"DELETE FROM {table} WHERE {where}", values)
        return done

    def _stored(self, conn, table, key):
        columns = table_columns(table)
        where, values = _where(key)
        found = conn.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE {where}{self.dialect.row_lock}",
                             values).fetchone()
        return None if found is None else dict(zip(columns, tuple(found)))

    def _keep(self, conn, table, key, row, reason) -> int:
        return conn.execute(
            "INSERT INTO quarantine (table_name, row_key, row, reason, quarantined_at) VALUES (?, ?, ?, ?, ?)"
            " RETURNING pk",
            (table, dumps(key), dumps({column: _text(value) for column, value in row.items()}), reason,
             utc_now_iso()),
        ).fetchone()[0]

    def _reset_unreadable(self, conn, table, key, row):
        defaults = {column.name: column.default for column in _TABLES[table].columns}
        reset = [column for column, kind in JSON_KINDS[table].items()
                 if row[column] is not None and json_problem(row[column], kind)]
        where, values = _where(key)
        for column in reset:
            conn.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", (defaults[column], *values))
        return reset

    def _detach_message(self, conn, row):
        """Keep the overlays and pins that name the message, then remove it as ``delete_messages`` does."""
        pk, message_id = row["session_pk"], row["id"]
        session = session_name(conn.execute(
            "SELECT tenant_id, agent_id, session_id FROM sessions WHERE pk = ?", (pk,)).fetchone())
        children = conn.execute("SELECT COUNT(*) FROM messages WHERE session_pk = ? AND parent_id = ?",
                                (pk, message_id)).fetchone()[0]
        kept: dict[str, int] = {}
        for table, names in (("compactions", "from_id = ? OR to_id = ?"), ("message_pins", "message_id = ?")):
            key_columns = _TABLES[table].key
            for found in conn.execute(f"SELECT {', '.join(key_columns)} FROM {table} WHERE session_pk = ?"
                                      f" AND ({names})", (pk, *[message_id] * names.count("?"))).fetchall():
                key = dict(zip(key_columns, tuple(found)))
                self._keep(conn, table, key, self._stored(conn, table, key),
                           f"{session}: it names message {message_id!r}, which was set aside")
                kept[table] = kept.get(table, 0) + 1
        self._store.sessions.storage(pk).delete_messages([message_id])
        return {"children": children, "new_parent": row["parent_id"], "overlays": kept.get("compactions", 0),
                "pins": kept.get("message_pins", 0)}

    def rows(self) -> list[dict]:
        """``[{"pk", "table_name", "row_key", "reason", "quarantined_at"}]``, oldest first."""
        return [dict(r) for r in self._all(
            "SELECT pk, table_name, row_key, reason, quarantined_at FROM quarantine ORDER BY pk")]
