"""The SQLite backend: an embedded file, the default.

One ``SQLiteStore`` holds one connection guarded by a re-entrant lock, so Streamlit's script threads
can share it. Several processes can open the same file: WAL lets readers run beside a writer, and
every write starts with ``BEGIN IMMEDIATE`` under a busy timeout, so writers queue instead of
failing (which is also why session writes need no row locks here). Search is FTS5.
"""
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreBusyError
from .core import SNIPPET_MARKS, Store, unstorable
from .fts import FullText, fts_query
from .integrity import SQLiteIntegrity
from .schema import migrate

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


class SQLiteStore(SQLiteIntegrity, Store):
    """``Store("lab.db")`` or ``Store(":memory:")``."""

    NO_LIMIT = -1
    SEARCH_ENGINE = "fts5"
    SEARCH_DESCRIPTION = "SQLite FTS5, ranked by BM25"

    def __init__(self, path=":memory:", *, timeout=30.0):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(
            self.path, timeout=timeout, check_same_thread=False, isolation_level=None
        )
        self._conn.row_factory = sqlite3.Row
        self._db = None
        try:
            self._set_up()
        except sqlite3.OperationalError as error:
            self._conn.close()
            self._raise_if_locked(error)
            raise

    def _set_up(self):
        """Connection settings and migrations; WAL mode and migrations need the write lock on a new file."""
        self._conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
        self._conn.execute("PRAGMA foreign_keys = ON")
        if self.path != ":memory:":
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            # Up to 64 MiB of pages (SQLite's default is 2 MiB): walking a 10k-message path hops
            # between index and table pages spread over the file, and re-reading them was about a
            # quarter of get_history. The cache only grows as pages are read.
            self._conn.execute("PRAGMA cache_size = -65536")
        with self._lock:
            migrate(self._conn)

    @property
    def db(self):
        """The file as a ``sqlite_utils.Database`` for inspection (tables, counts, ad-hoc queries).

        Built on first use: sqlite-utils imports pandas when it is installed, which would double
        the time of ``import memorylab``.
        """
        if self._db is None:
            import sqlite_utils

            self._db = sqlite_utils.Database(self._conn)
        return self._db

    def close(self):
        with self._lock:
            self._conn.close()

    @contextmanager
    def transaction(self):
        """A write transaction (``BEGIN IMMEDIATE``); nested calls join the outer one."""
        with self._lock:
            if self._conn.in_transaction:
                yield self._conn
                return
            self._execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except UnicodeEncodeError as error:
                self._conn.execute("ROLLBACK")
                raise unstorable(error, "SQLite") from None
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextmanager
    def snapshot(self):
        """A read transaction: several SELECTs see one consistent state of the file."""
        with self._lock:
            if self._conn.in_transaction:
                yield self._conn
                return
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")

    def _execute(self, sql, params=()):
        """Run ``BEGIN IMMEDIATE`` or a read, where a lock that outlasted the busy timeout and an
        unstorable string become clear errors."""
        try:
            return self._conn.execute(sql, params)
        except sqlite3.OperationalError as error:
            self._raise_if_locked(error)
            raise
        except UnicodeEncodeError as error:
            raise unstorable(error, "SQLite") from None

    def _raise_if_locked(self, error):
        """SQLite's busy handler has already retried for ``timeout`` seconds: say so, and what to do."""
        if str(error).startswith("database is locked"):
            raise StoreBusyError(
                f"{self.path} stayed locked by another writer for {self.timeout:g} s (a long import or "
                "compaction, or another process); nothing was changed. Retry when it has finished, or open "
                "the Store with a larger timeout="
            ) from None

    def _one(self, sql, params=()):
        with self._lock:
            return self._execute(sql, params).fetchone()

    def _all(self, sql, params=()):
        with self._lock:
            return self._execute(sql, params).fetchall()

    # -- dialect --------------------------------------------------------------------------------

    def _full_text(self, kind, query, *, any_word=False):
        match = fts_query(query, any_word=any_word)
        return None if match is None else (_FULL_TEXT[kind], match)

    @staticmethod
    def _instant(expression):
        # julianday reads every ISO-8601 spelling of one instant as the same number.
        return f"julianday({expression})"

    @staticmethod
    def _json_values(expression, alias):
        return f"json_each({expression}) AS {alias}"

    @staticmethod
    def _json_words(expression):
        """The scalar values of a JSON text as one text, keys left out (as the memory index takes them)."""
        return f"COALESCE((SELECT group_concat(atom, ' ') FROM json_tree({expression}) WHERE atom IS NOT NULL), '')"

    @staticmethod
    def _glob(column, parameter):
        return f"{column} GLOB {parameter}"

    @staticmethod
    def _glob_pattern(pattern):
        """A ``*``/``?`` glob as a SQLite GLOB: only ``[`` would mean something more, so it is made literal."""
        return pattern.replace("[", "[[]")
