"""Whole tables, row by row: what ``memorylab migrate`` reads from one store and writes into another.

A mixin of ``Store``; it relies on the store's ``transaction``, ``_one`` and ``_all``. ``TABLES``
names every stored column of every table once, for both backends (their schemas agree column for
column); what a backend derives itself is left out: PostgreSQL's generated ``tsv`` columns, and
SQLite's FTS5 tables, which its triggers fill as rows arrive.
"""
import json

from ..messages import message_text

TABLES = {
    # table: (primary key, the other columns); parents come before the tables that reference them.
    "agents": (("tenant_id", "agent_id"), ("name", "name_key", "slug", "created_at")),
    "sessions": (("pk",), ("tenant_id", "agent_id", "session_id", "created_at", "updated_at", "metadata",
                           "cached_prompt", "latest_message_id", "status")),
    "messages": (("seq",), ("session_pk", "id", "parent_id", "role", "parts", "text", "created_at", "metadata",
                            "tokens")),
    "compactions": (("session_pk", "id"), ("from_id", "to_id", "summary", "created_at", "metadata")),
    "context_blocks": (("session_pk", "label"), ("content", "updated_at")),
    "skill_activations": (("session_pk", "label", "key"), ("activated_at",)),
    "search_entries": (("pk",), ("tenant_id", "namespace", "key", "content", "updated_at")),
    "kv_entries": (("pk",), ("tenant_id", "namespace", "key", "value", "expires_at", "created_at", "updated_at")),
    "memory_records": (("pk",), ("workspace", "collection", "kind", "scope", "session_id", "summary", "body", "tags",
                                 "importance", "provenance", "vector_index", "created_at", "updated_at")),
}


def table_columns(table):
    """Every column of ``table`` that is copied, its primary key first."""
    key, others = TABLES[table]
    return key + others


class BulkStorage:
    def table_counts(self):
        """``{table: rows}`` for every table of ``TABLES``, in one query."""
        row = self._one("SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {t}) AS {t}" for t in TABLES))
        return {table: row[table] for table in TABLES}

    def table_rows(self, table, batch=1000):
        """The rows of ``table`` as tuples of ``table_columns(table)``, in lists of up to ``batch``, in
        primary-key order. Each list is one query that continues after the last key of the one before,
        so memory stays bounded; wrap the reading in ``snapshot()`` for one consistent state."""
        key = TABLES[table][0]
        columns = ", ".join(table_columns(table))
        order = ", ".join(key)
        after = f"({order}) > ({', '.join('?' * len(key))})"
        last = None
        while True:
            rows = self._all(
                f"SELECT {columns} FROM {table}{'' if last is None else ' WHERE ' + after}"
                f" ORDER BY {order} LIMIT ?",
                (*(last or ()), batch),
            )
            if not rows:
                return
            rows = [tuple(row) for row in rows]
            yield rows
            if len(rows) < batch:
                return
            last = rows[-1][:len(key)]

    def insert_rows(self, table, rows):
        """Insert tuples of ``table_columns(table)`` as they are, keys included, and return them as
        written: a message's search copy (``text``) is this backend's. Joins the caller's transaction."""
        columns = table_columns(table)
        if table == "messages":
            parts_at, text_at = columns.index("parts"), columns.index("text")
            rows = [(*row[:text_at], self._search_copy(row[parts_at], row[text_at]), *row[text_at + 1:])
                    for row in rows]
        with self.transaction() as conn:
            conn.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", rows
            )
        return rows

    def _search_copy(self, parts, text):
        """A message's ``text`` as this backend stores it. Another backend may have replaced what it
        cannot hold (PostgreSQL: NUL by U+FFFD); such a copy is rebuilt from the message's parts."""
        if "\ufffd" in text:
            text = message_text({"parts": json.loads(parts)})
        return self._searchable(text)

    def advance_identity(self, table, column):
        """Make keys generated from now on follow the largest one in ``table.column`` after rows were
        inserted with explicit keys. SQLite needs nothing: a new INTEGER PRIMARY KEY is MAX + 1."""
