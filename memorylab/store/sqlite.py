"""The SQLite backend: an embedded file, the default.

One ``SQLiteStore`` holds one writer connection guarded by a re-entrant lock, so Streamlit's script
threads can share it, and reader connections beside it. Several processes can open the same file: WAL
lets readers run beside a writer, and every write starts with ``BEGIN IMMEDIATE`` under a busy timeout,
so writers queue instead of failing (which is also why session writes need no row locks here). A read
uses the writer connection when no other thread holds it (its page cache is warm, and inside this
thread's transaction it sees that transaction's rows), else an idle reader connection: reads never
queue behind another thread's write, which may itself be waiting for another process. Search is FTS5.

A file that cannot be written opens read-only, without writing a byte: a write-protected file or folder,
``read_only=True``, or a full disk on which SQLite cannot even start the file's shared-memory index.
"""
from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import NotAStoreError, StoreBusyError, StoreError, StoreFullError, StoreReadOnlyError
from .core import Store, is_postgres_url
from .ddl import SQLiteDDL
from .dialect import SNIPPET_MARKS, Dialect, SearchEngine, unstorable
from .fts import FullText, fts_query
from .integrity import SQLiteIntegrity
from .migrations import SCHEMA_VERSION, migrate
from .schema import TABLES, sqlite_json_words

if TYPE_CHECKING:
    import sqlite_utils

_COMPANIONS = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database, named after it."""
_READ_ONLY = "attempt to write a readonly database"
_FULL = "database or disk is full"
_FAULTS = (
    # The start of SQLite's message: the error, what it says about the file, and what to do.
    ("file is not a database", StoreError, "is not a SQLite database, or its header is damaged",
     "open the right file, or restore a backup"),
    ("database disk image is malformed", StoreError, "is damaged",
     "restore a backup, or salvage what is readable with `sqlite3 FILE .recover`"),
    (_READ_ONLY, StoreReadOnlyError, "cannot be written",
     "give this user write permission on the file and its folder, or open a copy; reads still work"),
    (_FULL, StoreFullError, "cannot grow: the disk is full", "nothing was written; free some space and retry"),
    ("unable to open database file", StoreError, "cannot be opened",
     "name an existing file, or one in a folder this user may write in"),
    ("disk I/O error", StoreError, "could not be read or written", "check the disk and retry"),
    ("Cannot operate on a closed database", StoreError, "is closed", "open a new Store"),
)
_OPENED_READ_ONLY = {
    # Why a store was opened read-only: what a write is told instead of SQLite's own refusal.
    "asked": (StoreReadOnlyError, "was opened with read_only=True",
              "nothing was written; open it without read_only to write"),
    "protected": (StoreReadOnlyError, "is write-protected (the file or its folder), so it was opened read-only",
                  "nothing was written; give this user write permission on the file and its folder, or write "
                  "to a copy"),
    "full": (StoreFullError, "was opened read-only because the disk is full",
             "nothing was written; free some space and open the Store again"),
}


def _fault(error):
    """SQLite's message for ``error``; an index that could not grow is a full disk (Python 3.11+ says which)."""
    return _FULL if getattr(error, "sqlite_errorname", "") == "SQLITE_IOERR_SHMSIZE" else str(error)


def _write_protected(path) -> bool:
    """Whether this user may not write ``path``, or no one may by its mode bits: root could write it
    anyway, but whoever took every write bit away meant it to stay as it is."""
    return not os.access(path, os.W_OK, effective_ids=os.access in os.supports_effective_ids) \
        or not path.stat().st_mode & 0o222


def writes_over(database, path) -> bool:
    """Whether ``path``, however spelt (relative, through a symlink, a hard link), is the SQLite file
    ``database`` or one SQLite keeps beside it: writing there would destroy the database. A server's
    database, or one in memory, has no file to write over."""
    if is_postgres_url(database) or str(database) in (":memory:", ""):
        return False
    own = Path(database).expanduser().resolve()
    target = Path(path).expanduser()
    for file in (own, *(own.with_name(own.name + suffix) for suffix in _COMPANIONS)):
        if target.resolve() == file or target.exists() and file.exists() and os.path.samefile(target, file):
            return True
    return False


_STORE_TABLES = {table.name for table in TABLES}


def _foreign_tables(conn) -> list[str]:
    """The schema objects of another program in the database on ``conn``, found by reading only: none
    for a memorylab store (a version recorded, tables of memorylab's there, even if some were dropped
    behind its back) or a file that holds nothing yet."""
    names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
                                            " ORDER BY type = 'table' DESC, name")]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    return [] if version > 0 and _STORE_TABLES.intersection(names) else names


def wal_is_empty(file) -> bool:
    """Whether every committed change is in the file itself, so that it can be read as it lies on disk."""
    wal = Path(f"{file}-wal")
    return not wal.exists() or wal.stat().st_size == 0


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


class SQLiteDialect(Dialect):
    """SQLite's SQL: FTS5, julianday, json1, GLOB; its writers queue for the whole file, so no row locks."""

    name = "sqlite"
    search_engine = SearchEngine("fts5", "SQLite FTS5, ranked by BM25")
    no_limit = -1

    def full_text(self, kind, query, *, any_word=False, prefixes=True):
        match = fts_query(query, any_word=any_word, prefixes=prefixes)
        return None if match is None else (_FULL_TEXT[kind], match)

    def search_merge(self, table):
        """FTS5 writes a segment per insert statement; 'optimize' merges them into one."""
        return f"INSERT INTO {table}_fts({table}_fts) VALUES('optimize')"

    def instant(self, expression):
        # julianday reads every ISO-8601 spelling of one instant as the same number.
        return f"julianday({expression})"

    def session_rows_between(self, alias, low, high):
        """Read as one range of the table's key: the unary plus keeps the planner off the indexes that
        start with ``session_pk``, through which it would read the whole session for each range."""
        return f"{alias}.seq BETWEEN {low} AND {high} AND +{alias}.session_pk = :pk"

    def json_text(self, expression, key):
        # Damaged JSON reads as no value rather than failing the whole query (json_extract raises).
        return f"CASE WHEN json_valid({expression}) THEN json_extract({expression}, '$.{key}') END"

    def json_values(self, expression, alias):
        return f"json_each({expression}) AS {alias}"

    def json_words(self, expression):
        return sqlite_json_words(expression)

    def glob(self, column, parameter):
        return f"{column} GLOB {parameter}"

    def glob_pattern(self, pattern):
        """Only ``[`` would mean something more to GLOB, so it is made literal."""
        return pattern.replace("[", "[[]")

    def error(self, error, *, where, timeout):
        if isinstance(error, UnicodeEncodeError):
            return unstorable(error, "SQLite")
        message = _fault(error)
        if message.startswith("database is locked"):  # SQLite's busy handler has retried for ``timeout`` s
            return StoreBusyError(
                f"{where} stayed locked by another writer for {timeout:g} s (a long import or "
                "compaction, or another process); nothing was changed. Retry when it has finished, or open "
                "the Store with a larger timeout="
            )
        for start, kind, what, advice in _FAULTS:
            if message.startswith(start):
                return kind(f"{where} {what} ({message}): {advice}")
        return StoreError(f"{where}: SQLite refused the statement ({message}); if the file was changed outside "
                          "memorylab, `memorylab check` says what is wrong")


SQLITE = SQLiteDialect()


class SQLiteStore(Store):
    """``Store("lab.db")``, ``Store("lab.db", read_only=True)`` or ``Store(":memory:")``."""

    dialect = SQLITE
    _INTEGRITY = SQLiteIntegrity

    def __init__(self, path=":memory:", *, timeout=30.0, read_only=False):
        self.path = str(path)
        self._timeout = timeout
        self._lock = threading.RLock()  # the writer connection's
        self._local = threading.local()  # .conn: the connection of this thread's transaction or snapshot
        self._idle_readers, self._readers_lock, self._closed = [], threading.Lock(), False
        self._reader_uri = None  # None: one connection serves everything (":memory:")
        self._opened_read_only = None  # a key of _OPENED_READ_ONLY
        self._db = None
        file = None if self.path in (":memory:", "") else Path(self.path).expanduser()
        if file is None:
            self._conn = self._connect(self.path)
            self._set_up(writable=True)
        elif read_only:
            self._open_read_only(file, "asked")
        elif file.parent.exists() and _write_protected(file.parent) or file.exists() and _write_protected(file):
            self._open_read_only(file, "protected")
        else:
            self._open_writable(file)

    @property
    def read_only(self) -> bool:
        """Whether this store only reads (see ``_OPENED_READ_ONLY`` for why it may); a write raises
        ``StoreReadOnlyError``, or ``StoreFullError`` on a full disk."""
        return self._opened_read_only is not None

    def _connect(self, target, *, uri=False):
        try:
            conn = sqlite3.connect(target, timeout=self._timeout, check_same_thread=False, isolation_level=None,
                                   uri=uri)
        except (OSError, sqlite3.Error) as error:
            raise StoreError(f"cannot open {self.path} ({error}): name an existing file, or one in a folder this "
                             "user may write in") from error
        conn.row_factory = sqlite3.Row
        return conn

    def _open_writable(self, file):
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreError(f"cannot open {self.path} ({error}): name a file in a folder this user may write in") \
                from error
        self._reader_uri = f"{file.resolve().as_uri()}?mode=ro"
        try:
            if file.exists() and file.stat().st_size:
                self._refuse_foreign(self._reader_uri)
            self._conn = self._connect(str(file))
            self._set_up(writable=True)
        except StoreFullError as full:
            try:
                self._open_read_only(file, "full")
            except StoreError:
                raise full from full.__cause__

    def _open_read_only(self, file, why):
        """Open ``file`` for reading only. Reading a WAL file starts its shared-memory index beside it;
        where that cannot be written (a protected folder, a full disk) but the file holds every change,
        it is read as it lies on disk (SQLite's ``immutable``), which takes no lock either."""
        self._opened_read_only = why
        uri = f"{file.resolve().as_uri()}?mode=ro"
        if wal_is_empty(file) and (why == "protected" and _write_protected(file.parent) or why == "full"):
            uri += "&immutable=1"
        self._reader_uri = uri
        self._refuse_foreign(uri)
        self._conn = self._connect(uri, uri=True)
        self._set_up(writable=False)

    def _refuse_foreign(self, uri):
        """Refuse another program's database (an Agents SDK or llm file) before anything can write to it:
        a read-only connection of its own reads whether it holds tables and none of memorylab's."""
        conn = self._connect(uri, uri=True)
        try:
            foreign = _foreign_tables(conn)
        except sqlite3.Error as error:
            raise self._clear_error(error) from error
        finally:
            conn.close()
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise NotAStoreError(
                f"{self.path} is not a memorylab store: it holds another program's tables ({shown}) and none of "
                "memorylab's. It was opened read-only and was not changed. To bring its conversations into "
                f"memorylab, import it into a store: memorylab --db LAB.db import {self.path}")

    def _set_up(self, writable):
        """Connection settings, then migrations or, read-only, a check that none is due. Only a new or
        older file is written to here: WAL mode and migrations need the write lock."""
        try:
            self._configure(self._conn)
            self._conn.execute("PRAGMA foreign_keys = ON")
            ddl = SQLiteDDL(self._conn)
            if not writable:
                self._check_schema(ddl.version())
                return
            if self._reader_uri is not None:
                self._conn.execute("PRAGMA journal_mode = WAL")
            with self._lock:
                migrate(ddl)
        except BaseException as error:
            self._conn.close()
            if isinstance(error, sqlite3.Error):
                raise self._clear_error(error) from error
            raise

    def _configure(self, conn):
        conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
        if self._reader_uri is not None:
            conn.execute("PRAGMA synchronous = NORMAL")
            # Up to 64 MiB of pages (SQLite's default is 2 MiB): walking a 10k-message path hops
            # between index and table pages spread over the file, and re-reading them was about a
            # quarter of get_history. The cache only grows as pages are read.
            conn.execute("PRAGMA cache_size = -65536")

    def _check_schema(self, version):
        if version != SCHEMA_VERSION:
            raise StoreReadOnlyError(
                f"{self.path} has schema version {version} and this memorylab reads version {SCHEMA_VERSION}; "
                "opened read-only, it cannot be migrated: open it once with write permission (or read it with the "
                "memorylab that wrote it)"
            )

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
        with self._readers_lock:
            self._closed = True
            while self._idle_readers:
                self._idle_readers.pop().close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``); nested calls join the outer one."""
        with self._lock:
            if self._conn.in_transaction:
                yield self._conn
                return
            outer, self._local.conn = getattr(self._local, "conn", None), self._conn
            try:
                self._run(self._conn, "BEGIN IMMEDIATE")
                yield self._conn
                self._run(self._conn, "COMMIT")
            except BaseException as error:
                if self._conn.in_transaction:  # after a full disk or an I/O error SQLite has rolled back itself
                    self._run(self._conn, "ROLLBACK")
                if isinstance(error, (sqlite3.Error, UnicodeEncodeError)):
                    raise self._clear_error(error) from error
                raise
            finally:
                self._local.conn = outer

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: several SELECTs see one consistent state of the file. Inside this
        thread's transaction or snapshot it joins that one."""
        pinned = getattr(self._local, "conn", None)
        if pinned is not None:
            yield pinned
            return
        with self._reading() as conn:
            self._local.conn = conn
            self._run(conn, "BEGIN")
            try:
                yield conn
            except (sqlite3.Error, UnicodeEncodeError) as error:
                raise self._clear_error(error) from error
            finally:
                self._local.conn = None
                if conn.in_transaction:
                    self._run(conn, "COMMIT")

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The connection for a read: this thread's transaction or snapshot, else the writer when no
        other thread holds it, else an idle reader connection."""
        pinned = getattr(self._local, "conn", None)
        if pinned is not None:
            yield pinned
        elif self._lock.acquire(blocking=self._reader_uri is None):
            try:
                yield self._conn
            finally:
                self._lock.release()
        else:
            with self._reader() as conn:
                yield conn

    @contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        """An idle reader connection (opened when none is), given back afterwards."""
        with self._readers_lock:
            conn = self._idle_readers.pop() if self._idle_readers else None
        if conn is None:
            conn = self._connect(self._reader_uri, uri=True)
            self._configure(conn)
        try:
            yield conn
        finally:
            with self._readers_lock:
                if self._closed:
                    conn.close()
                else:
                    self._idle_readers.append(conn)

    def _run(self, conn, sql, params=(), fetch=None):
        """Run one statement on ``conn`` (and ``fetch`` its rows), where any failure becomes a MemoryLabError."""
        try:
            cursor = conn.execute(sql, params)
            return cursor if fetch is None else fetch(cursor)
        except (sqlite3.Error, UnicodeEncodeError) as error:
            raise self._clear_error(error) from error

    def _clear_error(self, error):
        """The MemoryLabError for a failed statement: what it says about the file, and what to do (a
        store opened read-only says why it was)."""
        if not isinstance(error, UnicodeEncodeError) and _fault(error).startswith(_READ_ONLY) \
                and self._opened_read_only:
            kind, what, advice = _OPENED_READ_ONLY[self._opened_read_only]
            return kind(f"{self.path} {what} ({_fault(error)}): {advice}")
        return SQLITE.error(error, where=self.path, timeout=self._timeout)

    def fetch_one(self, sql, params=()) -> Any:
        with self._reading() as conn:
            return self._run(conn, sql, params, sqlite3.Cursor.fetchone)

    def fetch_all(self, sql, params=()) -> list:
        with self._reading() as conn:
            return self._run(conn, sql, params, sqlite3.Cursor.fetchall)

    def fetch_tuples(self, sql, params=()) -> list[tuple]:
        """``fetch_all`` as plain tuples: making a ``sqlite3.Row`` for each was a tenth of reading a
        10,000-message branch."""
        with self._reading() as conn:
            return self._run(conn, sql, params, _fetch_tuples)
