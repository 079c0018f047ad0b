"""The base of every repository: one concept's SQL, run through the store's connections.

A repository holds no connection of its own. It reads and writes through the store it was made by
(``transaction``, ``snapshot``, ``_one``, ``_all``) and takes the dialect's expressions and full-text
search from it (``self.dialect.instant(...)``, ``self.dialect.full_text(...)``), so its SQL reads the
same on every backend and no repository reaches into another.
"""
from contextlib import AbstractContextManager
from itertools import islice
from typing import Any

ROWS_PER_INSERT = 500
"""Rows per multi-row INSERT. SQLite's full-text index flushes what it has buffered at the end of
every statement, so one statement per row (``executemany``) makes it write a segment per message:
100,000 messages took 6.5 s that way against 1.0 s in statements of 500 rows. 500 rows of the widest
table stay well under both backends' limit on parameters (32,766 for SQLite, 65,535 for PostgreSQL)."""


def insert_rows(conn, table, columns, rows) -> None:
    """Insert tuples of ``columns`` into ``table`` in multi-row statements, within ``conn``'s transaction."""
    rows = iter(rows)
    head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
    one = "(" + ", ".join("?" * len(columns)) + ")"
    while chunk := list(islice(rows, ROWS_PER_INSERT)):
        conn.execute(head + ", ".join([one] * len(chunk)), [value for row in chunk for value in row])


class Repository:
    def __init__(self, store):
        self._store = store
        self.dialect = store.dialect

    def __repr__(self):
        return f"<{type(self).__name__} of {self._store!r}>"

    def transaction(self) -> AbstractContextManager[Any]:
        return self._store.transaction()

    def _one(self, sql, params=()):
        return self._store.fetch_one(sql, params)

    def _all(self, sql, params=()):
        return self._store.fetch_all(sql, params)

    def _tuples(self, sql, params=()):
        return self._store.fetch_tuples(sql, params)
