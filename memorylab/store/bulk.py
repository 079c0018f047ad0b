"""Whole tables, row by row: what ``memorylab copy`` reads from one store and writes into another.

``TABLES`` lists the stored columns of every table as ``schema`` declares them, for both backends;
what a backend derives itself is not declared as a column and so not copied: PostgreSQL's generated
``tsv`` columns, and SQLite's FTS5 tables, which its triggers fill as rows arrive.
"""
import json
from collections.abc import Iterator

from ..messages import message_text
from . import schema
from .repository import Repository, insert_rows

TABLES = {table.name: (table.key, table.other_columns) for table in schema.TABLES}
"""``{table: (primary key, the other columns)}``; parents come before the tables that reference them."""


def table_columns(table) -> tuple[str, ...]:
    """Every column of ``table`` that is copied, its primary key first."""
    key, others = TABLES[table]
    return key + others


class BulkCopy(Repository):
    def counts(self) -> dict[str, int]:
        """``{table: rows}`` for every table of ``TABLES``, in one query."""
        row = self._one("SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {t}) AS {t}" for t in TABLES))
        return {table: row[table] for table in TABLES}

    def rows(self, table, batch=1000) -> Iterator[list[tuple]]:
        """The rows of ``table`` as tuples of ``table_columns(table)``, in lists of up to ``batch``, in
        primary-key order. Each list is one query that continues after the last key of the one before,
        so memory stays bounded; wrap the reading in the store's ``snapshot()`` for one consistent state."""
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

    def insert(self, table, rows) -> list[tuple]:
        """Insert tuples of ``table_columns(table)`` as they are, keys included, and return them as
        written: a message's search copy (``text``) is this backend's. Joins the caller's transaction."""
        columns = table_columns(table)
        if table == "messages":
            parts_at, text_at = columns.index("parts"), columns.index("text")
            rows = [(*row[:text_at], self._search_copy(row[parts_at], row[text_at]), *row[text_at + 1:])
                    for row in rows]
        with self.transaction() as conn:
            insert_rows(conn, table, columns, rows)
        return rows

    def _search_copy(self, parts, text):
        """A message's ``text`` as this backend stores it. Another backend may have replaced what it
        cannot hold (PostgreSQL: NUL by U+FFFD); such a copy is rebuilt from the message's parts."""
        if "\ufffd" in text:
            text = message_text({"parts": json.loads(parts)})
        return self.dialect.searchable(text)

    def advance_identity(self, table, column) -> None:
        """Make keys generated from now on follow the largest one in ``table.column`` after rows were
        inserted with explicit keys. SQLite needs nothing: a new INTEGER PRIMARY KEY is MAX + 1."""


class PostgresBulkCopy(BulkCopy):
    def advance_identity(self, table, column) -> None:
        """An identity's sequence does not see keys inserted explicitly (``memorylab copy``): move it
        past the largest, or the next generated key collides. ``setval`` is not undone by a rollback."""
        with self.transaction() as conn:
            conn.execute(f"SELECT setval(pg_get_serial_sequence(?, ?), MAX({column})) FROM {table}", (table, column))
