"""The SQLite backend: an embedded file, the default.

One ``SQLiteStore`` holds one connection guarded by a re-entrant lock, so Streamlit's script threads
can share it. Several processes can open the same file: WAL lets readers run beside a writer, and
every write starts with ``BEGIN IMMEDIATE`` under a busy timeout, so writers queue instead of
failing (which is also why session writes need no row locks here). Search is FTS5.
"""
from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import StoreBusyError, StoreError
from .core import SNIPPET_MARKS, SearchEngine, Store, unstorable
from .ddl import SQLiteDDL
from .fts import FullText, fts_query
from .integrity import SQLiteIntegrity
from .migrations import migrate
from .schema import sqlite_json_words

if TYPE_CHECKING:
    import sqlite_utils

_FAULTS = (
    # The start of SQLite's message: what it says about the file, and what to do.
    ("file is not a database", "is not a SQLite database, or its header is damaged",
     "open the right file, or restore a backup"),
    ("database disk image is malformed", "is damaged",
     "restore a backup, or salvage what is readable with `sqlite3 FILE .recover`"),
    ("attempt to write a readonly database", "cannot be written",
     "give this user write permission on the file and its folder, or open a copy"),
    ("database or disk is full", "cannot grow: the disk is full", "free some space and retry"),
    ("disk I/O error", "could not be read or written", "check the disk and retry"),
    ("Cannot operate on a closed database", "is closed", "open a new Store"),
)

_FULL_TEXT = {
    "messages": FullText(
        "messages_fts JOIN messages m ON m.seq = messages_fts.rowid", "messages_fts MATCH :match",
        "messages_fts.rank", f"snippet(messages_fts, 0, '{SNIPPET_MARKS[0]}', '{SNIPPET_MARKS[1]}', '…', 24)",
    ),
    "entries": FullText(
        "search_entries_fts JOIN search_entries e ON e.pk = search_entries_fts.rowid",
        "search_entries_fts MATCH :match", "search_entries_fts.rank",
    ),
    # BM25 weights: the summary counts most, then the tags, then the words of the body.
    "memories": FullText(
        "memory_records_fts JOIN memory_records r ON r.pk = memory_records_fts.rowid",
        "memory_records_fts MATCH :match", "bm25(memory_records_fts, 3.0, 1.0, 2.0)",
    ),
}


def _fetch_tuples(cursor):
    cursor.row_factory = None  # rows are made as they are fetched, so this holds from the first
    return cursor.fetchall()


class SQLiteStore(Store):
    """``Store("lab.db")`` or ``Store(":memory:")``."""

    _NO_LIMIT = -1
    _INTEGRITY = SQLiteIntegrity
    search_engine = SearchEngine("fts5", "SQLite FTS5, ranked by BM25")

    def __init__(self, path=":memory:", *, timeout=30.0):
        self.path = str(path)
        self._timeout = timeout
        self._lock = threading.RLock()
        try:
            if self.path != ":memory:":
                Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, timeout=timeout, check_same_thread=False, isolation_level=None
            )
        except (OSError, sqlite3.Error) as error:
            raise StoreError(f"cannot open {self.path} ({error}): name a file in a folder this user may "
                             "write in") from error
        self._conn.row_factory = sqlite3.Row
        self._db = None
        try:
            self._set_up()
        except sqlite3.Error as error:
            self._conn.close()
            raise self._clear_error(error) from error

    def _set_up(self):
        """Connection settings and migrations; WAL mode and migrations need the write lock on a new file."""
        self._conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
        self._conn.execute("PRAGMA foreign_keys = ON")
        if self.path != ":memory:":
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            # Up to 64 MiB of pages (SQLite's default is 2 MiB): walking a 10k-message path hops
            # between index and table pages spread over the file, and re-reading them was about a
            # quarter of get_history. The cache only grows as pages are read.
            self._conn.execute("PRAGMA cache_size = -65536")
        with self._lock:
            migrate(SQLiteDDL(self._conn))

    @property
    def db(self) -> sqlite_utils.Database:
        """The file as a ``sqlite_utils.Database`` for inspection (tables, counts, ad-hoc queries).

        Built on first use: sqlite-utils imports pandas when it is installed, which would double
        the time of ``import memorylab``.
        """
        if self._db is None:
            import sqlite_utils

            self._db = sqlite_utils.Database(self._conn)
        return self._db

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``); nested calls join the outer one."""
        with self._lock:
            if self._conn.in_transaction:
                yield self._conn
                return
            self._execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._execute("COMMIT")
            except BaseException as error:
                if self._conn.in_transaction:  # after a full disk or an I/O error SQLite has rolled back itself
                    self._execute("ROLLBACK")
                if isinstance(error, (sqlite3.Error, UnicodeEncodeError)):
                    raise self._clear_error(error) from error
                raise

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: several SELECTs see one consistent state of the file."""
        with self._lock:
            if self._conn.in_transaction:
                yield self._conn
                return
            self._execute("BEGIN")
            try:
                yield self._conn
            except (sqlite3.Error, UnicodeEncodeError) as error:
                raise self._clear_error(error) from error
            finally:
                if self._conn.in_transaction:
                    self._execute("COMMIT")

    def _execute(self, sql, params=(), fetch=None):
        """Run one statement (and ``fetch`` its rows), where any failure becomes a MemoryLabError."""
        try:
            cursor = self._conn.execute(sql, params)
            return cursor if fetch is None else fetch(cursor)
        except (sqlite3.Error, UnicodeEncodeError) as error:
            raise self._clear_error(error) from error

    def _clear_error(self, error):
        """The MemoryLabError for a failed statement: what it says about the file, and what to do."""
        if isinstance(error, UnicodeEncodeError):
            return unstorable(error, "SQLite")
        message = str(error)
        if message.startswith("database is locked"):  # SQLite's busy handler has retried for ``timeout`` s
            return StoreBusyError(
                f"{self.path} stayed locked by another writer for {self._timeout:g} s (a long import or "
                "compaction, or another process); nothing was changed. Retry when it has finished, or open "
                "the Store with a larger timeout="
            )
        for start, what, advice in _FAULTS:
            if message.startswith(start):
                return StoreError(f"{self.path} {what} ({message}): {advice}")
        return StoreError(f"{self.path}: SQLite refused the statement ({message}); if the file was changed outside "
                          "memorylab, `memorylab check` says what is wrong")

    def _one(self, sql, params=()):
        with self._lock:
            return self._execute(sql, params, sqlite3.Cursor.fetchone)

    def _all(self, sql, params=()):
        with self._lock:
            return self._execute(sql, params, sqlite3.Cursor.fetchall)

    def _all_tuples(self, sql, params=()):
        """``_all`` as plain tuples, for reads of thousands of rows unpacked by position: making a
        ``sqlite3.Row`` for each was a tenth of reading a 10,000-message branch."""
        with self._lock:
            return self._execute(sql, params, _fetch_tuples)

    # -- dialect --------------------------------------------------------------------------------

    def _settle_search(self, table):
        """FTS5 writes a segment per insert statement; 'optimize' merges them into one."""
        with self.transaction() as conn:
            conn.execute(f"INSERT INTO {table}_fts({table}_fts) VALUES('optimize')")

    def _full_text(self, kind, query, *, any_word=False):
        match = fts_query(query, any_word=any_word)
        return None if match is None else (_FULL_TEXT[kind], match)

    @staticmethod
    def _instant(expression):
        # julianday reads every ISO-8601 spelling of one instant as the same number.
        return f"julianday({expression})"

    @staticmethod
    def _session_rows_between(alias, low, high):
        """``alias``'s rows of session ``:pk`` with seq in ``low .. high``, read as one range of the table's
        key: the unary plus keeps the planner off the indexes that start with ``session_pk``, through
        which it would read the whole session for each range."""
        return f"{alias}.seq BETWEEN {low} AND {high} AND +{alias}.session_pk = :pk"

    @staticmethod
    def _json_text(expression, key):
        return f"json_extract({expression}, '$.{key}')"

    @staticmethod
    def _json_values(expression, alias):
        return f"json_each({expression}) AS {alias}"

    _json_words = staticmethod(sqlite_json_words)

    @staticmethod
    def _glob(column, parameter):
        return f"{column} GLOB {parameter}"

    @staticmethod
    def _glob_pattern(pattern):
        """A ``*``/``?`` glob as a SQLite GLOB: only ``[`` would mean something more, so it is made literal."""
        return pattern.replace("[", "[[]")
