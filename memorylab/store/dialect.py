"""What SQLite and PostgreSQL do differently, in one object: ``store.dialect``.

The repositories write their SQL once, in what both engines speak (``?``/``:name`` parameters,
``RETURNING``, ``ON CONFLICT ... DO UPDATE``, recursive CTEs). Where the engines part, they ask the
store's ``Dialect``: an expression (an instant, a JSON field, a glob), a clause (the row lock of a
session write), a fact about the engine (whether one statement may write several tables), the
full-text search to run, or the error a driver's failure becomes. ``SQLiteDialect`` and
``PostgresDialect`` live beside their backends; this class is the interface, with the defaults
both share.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInputError, MemoryLabError
from .fts import FullText


@dataclass(frozen=True)
class SearchEngine:
    """Which full-text engine a backend searches with: ``name`` for diagnostics, ``description`` for people."""

    name: str
    description: str


SNIPPET_MARKS = ("\u2983", "\u2984")
"""Brackets around matched words in search snippets (characters rare enough not to clash with text)."""


def unstorable(error: UnicodeEncodeError, engine: str) -> InvalidInputError:
    """Python strings may hold half of a UTF-16 surrogate pair; a database's UTF-8 text cannot."""
    return InvalidInputError(
        f"text holding an unpaired surrogate ({error.object[error.start:error.end]!r} at position {error.start}) "
        f"cannot be stored or looked up in {engine}; nothing was written"
    )


class Dialect:
    """The SQL of one engine where it differs from the other's. Stateless: one instance per engine."""

    name = ""
    search_engine = SearchEngine("", "")
    row_lock = ""
    """Appended to the read that starts a session write: where writers do not queue for the whole
    database (PostgreSQL), it locks the session row so its appends and overlays happen one at a time."""
    name_lock: str | None = None
    """A statement that holds the name ``:name`` until the transaction ends, where writers do not queue
    for the whole database (PostgreSQL): two writers of a session that may not exist yet take turns."""
    chained_writes = False
    """Whether one statement may write to several tables (a data-modifying WITH): an append then writes
    the message and moves the session's newest pointer at once, and a KV set purges and upserts at once."""
    no_limit: int | None = None
    """What ``LIMIT :limit`` takes to mean "no limit"."""

    def __repr__(self):
        return f"<{type(self).__name__}>"

    def native(self, sql: str) -> str:
        """``sql`` with its ``?`` and ``:name`` parameters as the driver takes them."""
        return sql

    def searchable(self, text: str) -> str:
        """The copy of a message's text that search indexes (what the engine's text can hold)."""
        return text

    def full_text(self, kind: str, query: Any, *, any_word: bool = False,
                  prefixes: bool = True) -> tuple[FullText, str] | None:
        """The ``FullText`` clauses over ``kind`` ("messages", "entries" or "memories") and the
        ``:match`` value for ``query``; None when the query holds nothing to search for."""
        raise NotImplementedError

    def search_merge(self, table: str) -> str | None:
        """A statement merging what ``table``'s search index buffered during a bulk write; None where
        the engine's index needs no such care."""
        return None

    def instant(self, expression: str) -> str:
        """An ISO-8601 text as a comparable instant, however it is spelt (``Z``, an offset, a fraction)."""
        raise NotImplementedError

    def session_rows_between(self, alias: str, low: str, high: str) -> str:
        """The condition on ``alias`` for the rows of session ``:pk`` with seq in ``low .. high``, as the
        engine reads one range fastest."""
        raise NotImplementedError

    def json_text(self, expression: str, key: str) -> str:
        """The text at ``key`` of the JSON object in ``expression``; NULL for damaged JSON."""
        raise NotImplementedError

    def json_values(self, expression: str, alias: str) -> str:
        """A FROM item: the values of the JSON array in ``expression``, as ``alias.value``."""
        raise NotImplementedError

    def json_words(self, expression: str) -> str:
        """The words of every string in the JSON of ``expression``, as one text (for substring search)."""
        raise NotImplementedError

    def glob(self, column: str, parameter: str) -> str:
        """The condition that ``column`` matches the pattern ``glob_pattern`` made, bound to ``parameter``."""
        raise NotImplementedError

    def glob_pattern(self, pattern: str) -> str:
        """A ``*``/``?`` glob as the engine's own pattern, every other character literal."""
        raise NotImplementedError

    def error(self, error: Exception, *, where: str, timeout: float) -> MemoryLabError:
        """The ``MemoryLabError`` a failed statement on ``where`` (a store's path) becomes: what the
        engine said, and what to do; ``timeout`` is how long a writer waited for a lock."""
        raise NotImplementedError
