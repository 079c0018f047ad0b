"""The base of every repository: one concept's SQL, run through the store's connections.

A repository holds no connection of its own. It reads and writes through the store it was made by
(``transaction``, ``snapshot``, ``_one``, ``_all``) and takes the dialect's expressions and full-text
search from it (``self._store._instant(...)``, ``self._store._full_text(...)``), so its SQL reads the
same on every backend and no repository reaches into another.
"""
from contextlib import AbstractContextManager
from typing import Any


class Repository:
    def __init__(self, store):
        self._store = store

    def __repr__(self):
        return f"<{type(self).__name__} of {self._store!r}>"

    def transaction(self) -> AbstractContextManager[Any]:
        return self._store.transaction()

    def _one(self, sql, params=()):
        return self._store._one(sql, params)

    def _all(self, sql, params=()):
        return self._store._all(sql, params)
