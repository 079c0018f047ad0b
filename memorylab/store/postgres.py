"""The PostgreSQL backend: one memory store shared by a team, or an agent's production database.

``Store("postgresql://user@host/db")`` opens a ``PostgresStore``: a psycopg 3 connection pool, the
schema as ``ddl`` writes it and the SQL of ``core``, whose ``?``/``:name`` parameters are rewritten once
per statement for psycopg. A transaction pins one pooled connection to its thread, so the reads a
write makes see its own rows and nested calls join it; a read outside a transaction borrows any
connection. Writers do not queue for the whole database as on SQLite: session writes lock their
session's row instead (``FOR NO KEY UPDATE``), which keeps "append under the newest leaf" and
overlay numbering exact under concurrent appends. Passwords come from the environment
(``PGPASSWORD``) or ``~/.pgpass`` as libpq reads them; ``path`` never shows one.

A server that goes away is said at once (``StoreUnavailableError``), and once it is back no call fails:
the pool checks a connection before handing it out and reconnects on demand (see ``_borrowed``).
"""
import re
import select
import threading
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ClassVar, NoReturn
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import (
    InvalidInputError,
    MemoryLabError,
    StoreBusyError,
    StoreError,
    StoreFullError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from .bulk import PostgresBulkCopy
from .core import Store
from .ddl import PostgresDDL
from .dialect import SNIPPET_MARKS, Dialect, SearchEngine, unstorable
from .fts import FullText, tsquery
from .integrity import PostgresIntegrity
from .migrations import migrate
from .schema import INDEXED_CHARACTERS

_QUERY = "to_tsquery('simple', memorylab_fold(:match)) AS q"
_FULL_TEXT = {
    # Ranks are negated so that, as with FTS5's BM25, lower is better.
    "messages": FullText(
        f"messages m CROSS JOIN {_QUERY}", "m.tsv @@ q", "-ts_rank_cd(m.tsv, q)",
        f"ts_headline('simple', left(m.text, {INDEXED_CHARACTERS}), q, 'StartSel={SNIPPET_MARKS[0]},"
        f" StopSel={SNIPPET_MARKS[1]}, MaxFragments=1, MaxWords=24, MinWords=8')",
    ),
    "entries": FullText(f"search_entries e CROSS JOIN {_QUERY}", "e.tsv @@ q", "-ts_rank_cd(e.tsv, q)"),
    # Weights {D, C, B, A}: the body (D) a third of the summary (A), the tags (B) two thirds, as on SQLite.
    "memories": FullText(
        f"memory_records r CROSS JOIN {_QUERY}", "r.tsv @@ q", "-ts_rank('{0.33, 0.33, 0.67, 1.0}', r.tsv, q)",
    ),
}

_PATIENCE = 0.1
"""Seconds a call waits for a pooled connection before asking the server directly whether it is there."""
_SERVER_GONE = ("57P01", "57P02", "57P03")  # admin shutdown (a restart, a killed backend), crash, starting up

_PLACEHOLDER = re.compile(r"%|\?|(?<![:\w]):([A-Za-z_]\w*)")
_translated: dict[str, str] = {}


def _translate(sql):
    """SQLite's ``?`` and ``:name`` parameters as psycopg's ``%s`` and ``%(name)s`` (``%`` doubled)."""
    found = _translated.get(sql)
    if found is None:
        found = _translated[sql] = _PLACEHOLDER.sub(
            lambda m: "%%" if m.group(0) == "%" else "%s" if m.group(0) == "?" else f"%({m.group(1)})s", sql
        )
    return found


class _Row(tuple):
    """A result row that reads like ``sqlite3.Row``: by position, by column name, and through ``dict()``."""

    __slots__ = ()
    _index: ClassVar[dict[str, int]] = {}

    def __getitem__(self, key):
        return tuple.__getitem__(self, self._index[key] if isinstance(key, str) else key)

    def keys(self):
        return list(self._index)


_row_types: dict[tuple[str, ...], type[_Row]] = {}


def _row_factory(cursor):
    if cursor.description is None:
        return tuple
    names = tuple(column.name for column in cursor.description)
    row_type = _row_types.get(names)
    if row_type is None:
        row_type = _row_types[names] = type("Row", (_Row,), {"__slots__": (), "_index": {
            name: i for i, name in enumerate(names)}})
    return row_type


def redact(url):
    """``url`` without its password (in the address or as a ``password=`` parameter)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}@{host}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "password"], safe="/")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _one_line(error):
    """libpq's messages run over several lines (a hint on the second); errors here are one line."""
    return " ".join(str(error).split())


def _readable(fd):
    """Whether ``fd`` has something to read right now (``poll`` where there is one: ``select`` stops at fd 1023)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])


def _server_gone(error):
    """Whether ``error`` says the server is out of reach rather than refusing a statement: no answer at
    all (no SQLSTATE), a connection failure (class 08), or a server shutting down or starting up."""
    state = getattr(error, "sqlstate", None)
    return isinstance(error, psycopg.OperationalError) and (
        state is None or state.startswith("08") or state in _SERVER_GONE)


class PostgresDialect(Dialect):
    """PostgreSQL's SQL: psycopg's parameters, tsvector search, timestamptz, jsonb, LIKE, row and
    advisory locks (its writers do not queue for the whole database)."""

    name = "postgresql"
    search_engine = SearchEngine("postgres-tsvector", "PostgreSQL tsvector, ranked by ts_rank")
    row_lock = " FOR NO KEY UPDATE"
    name_lock = "SELECT pg_advisory_xact_lock(hashtextextended(:name, 0))"
    chained_writes = True  # a data-modifying WITH runs whether or not its rows are read: one round trip
    no_limit = None

    def native(self, sql):
        return _translate(sql)

    def searchable(self, text):
        # PostgreSQL text cannot hold NUL; the search copy shows U+FFFD where the message (kept
        # whole in its JSON parts) has one.
        return text.replace("\x00", "\ufffd") if "\x00" in text else text

    def full_text(self, kind, query, *, any_word=False, prefixes=True):
        match = tsquery(query, any_word=any_word, prefixes=prefixes)
        return None if match is None else (_FULL_TEXT[kind], match)

    def session_rows_between(self, alias, low, high):
        """One range of messages_session."""
        return f"{alias}.session_pk = :pk AND {alias}.seq BETWEEN {low} AND {high}"

    def instant(self, expression):
        return f"CAST({expression} AS timestamptz)"

    def json_text(self, expression, key):
        # Damaged JSON reads as no value rather than failing the whole query (the cast raises).
        return f"(CASE WHEN {expression} IS JSON OBJECT THEN CAST({expression} AS jsonb) ->> '{key}' END)"

    def json_values(self, expression, alias):
        return f"jsonb_array_elements_text(CAST({expression} AS jsonb)) AS {alias}(value)"

    def json_words(self, expression):
        return f"memorylab_json_words({expression})"

    def glob(self, column, parameter):
        return f"{column} LIKE {parameter} ESCAPE '\\'"

    def glob_pattern(self, pattern):
        """LIKE's own ``%``, ``_`` and ``\\`` are made literal."""
        escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return escaped.replace("*", "%").replace("?", "_")

    def error(self, error, *, where, timeout):
        if isinstance(error, UnicodeEncodeError):
            return unstorable(error, "PostgreSQL")
        if isinstance(error, psycopg.DataError) and "NUL" in str(error):
            return InvalidInputError(
                "text holding a NUL character (\\x00) cannot be stored in PostgreSQL; nothing was written"
            )
        if isinstance(error, (pg_errors.LockNotAvailable, pg_errors.DeadlockDetected, PoolTimeout)):
            return StoreBusyError(
                f"{where}: another writer held what this write needed for {timeout:g} s (a long "
                "import or compaction, or another process); nothing was changed. Retry when it has finished, "
                "or open the Store with a larger timeout="
            )
        if _server_gone(error):
            return StoreUnavailableError(
                f"the PostgreSQL server of {where} cannot be reached, or is shutting down or starting up "
                f"({_one_line(error)}); a write it interrupted was rolled back unless the server had committed it. "
                "Retry when the server is back: the store reconnects by itself"
            )
        if isinstance(error, pg_errors.DiskFull):
            return StoreFullError(f"the PostgreSQL server of {where} has no disk space left ({_one_line(error)}): "
                                  "nothing was written; free some space on the server and retry")
        if isinstance(error, pg_errors.ReadOnlySqlTransaction):
            return StoreReadOnlyError(f"the PostgreSQL server of {where} takes no writes ({_one_line(error)}): "
                                      "nothing was written; connect to the primary server, or to one that is not "
                                      "read-only")
        if isinstance(error, psycopg.OperationalError):
            return StoreError(f"the PostgreSQL server of {where} failed the request ({_one_line(error)}); "
                              "retry, and if it goes on, read the server's log")
        return StoreError(f"{where}: PostgreSQL refused the statement ({_one_line(error)}); if the database was "
                          "changed outside memorylab, `memorylab check` says what is wrong")


POSTGRES = PostgresDialect()


class _Connection:
    """A pooled connection speaking the SQL of ``core``, with PostgreSQL's refusals made clear."""

    __slots__ = ("raw", "store")

    def __init__(self, raw, store):
        self.raw, self.store = raw, store

    def execute(self, sql, params=()):
        try:
            return self.raw.execute(POSTGRES.native(sql), params)
        except (psycopg.Error, UnicodeEncodeError) as error:
            raise self.store._clear_error(error) from error

    def executemany(self, sql, rows):
        cursor = self.raw.cursor()
        try:
            cursor.executemany(POSTGRES.native(sql), rows)
        except (psycopg.Error, UnicodeEncodeError) as error:
            raise self.store._clear_error(error) from error
        return cursor


class PostgresStore(Store):
    """``Store("postgresql://user@host/db")``: the same contract as the SQLite file, on a server."""

    dialect = POSTGRES
    _INTEGRITY = PostgresIntegrity
    _BULK = PostgresBulkCopy

    def __init__(self, url, *, timeout=30.0, pool_size=8):
        self.path = redact(url)
        self._url = url
        self._timeout = timeout
        self._local = threading.local()
        try:
            with self._connect() as conn:
                migrate(PostgresDDL(conn))
            # reconnect_timeout=0: a connection that cannot be made is not retried in the background for
            # minutes (with growing pauses), it is asked for again by the next call, so the first call
            # after the server is back connects at once.
            self._pool = ConnectionPool(
                url, min_size=1, max_size=pool_size, timeout=timeout, open=False, configure=self._configure,
                check=self._check, reconnect_timeout=0,
                kwargs={"autocommit": True, "row_factory": _row_factory}, name="memorylab",
            )
            self._pool.open(wait=True, timeout=timeout)
        except psycopg.Error as error:
            message = f"cannot open the PostgreSQL store {self.path}: {_one_line(error)}"
            if _server_gone(error):
                raise StoreUnavailableError(f"{message}; the server cannot be reached, or is shutting down or "
                                            "starting up: retry when it is back") from error
            raise StoreError(message) from error

    def _connect(self):
        return psycopg.connect(self._url, autocommit=True, connect_timeout=max(1, int(self._timeout)))

    def _configure(self, conn):
        # A lock held longer than the timeout (a long import, a stuck writer) fails the waiting
        # statement instead of hanging it, as SQLite's busy timeout does.
        conn.execute(f"SET lock_timeout = {int(self._timeout * 1000)}")

    def _check(self, conn):
        """The pool's check of a connection it is about to hand out. An idle connection hears from the
        server only when the server ends it (a restart, ``pg_terminate_backend``), so a quiet socket
        costs no round trip; a readable one gets psycopg_pool's own check. A dead one drains the pool:
        after a restart every other idle connection is as dead, and each would cost a check and a pause."""
        try:
            if _readable(conn.fileno()):
                ConnectionPool.check_connection(conn)
        except psycopg.OperationalError:
            self._pool.drain()
            raise

    @property
    def db(self) -> NoReturn:
        raise MemoryLabError("sqlite-utils inspection (Store.db) needs a SQLite store; this one is PostgreSQL")

    def close(self) -> None:
        self._pool.close()

    def _clear_error(self, error):
        """The MemoryLabError for a failed statement: what the server said, and what to do."""
        return POSTGRES.error(error, where=self.path, timeout=self._timeout)

    @contextmanager
    def _connection(self, isolation=None):
        """The connection this thread has pinned inside a transaction, else one from the pool: pinned
        inside a new transaction when ``isolation`` is given ("" for the server's default level), in
        autocommit for a single read when it is None."""
        current = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        try:
            with self._borrowed() as raw:
                conn = _Connection(raw, self)
                if isolation is None:
                    yield conn
                    return
                self._local.conn = conn
                try:
                    with raw.transaction():
                        if isolation:
                            raw.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
                        yield conn
                finally:
                    self._local.conn = None
        except psycopg.Error as error:
            raise self._clear_error(error) from error

    @contextmanager
    def _borrowed(self):
        """A live pooled connection. Waiting for one is the pool's job, up to the timeout; but when none
        comes at once, a new connection of its own asks the server whether it is there at all, so that
        an outage is said at once instead of after the timeout."""
        try:
            raw = self._pool.getconn(timeout=min(_PATIENCE, self._timeout))
        except PoolTimeout:
            self._connect().close()
            raw = self._pool.getconn(timeout=self._timeout)
        try:
            yield raw
        finally:
            self._pool.putconn(raw)

    def transaction(self) -> AbstractContextManager[_Connection]:
        """A write transaction; nested calls join the outer one."""
        return self._connection("")

    def snapshot(self) -> AbstractContextManager[_Connection]:
        """A read transaction: several SELECTs see one consistent state of the database."""
        return self._connection("REPEATABLE READ")

    def fetch_one(self, sql, params=()) -> Any:
        with self._connection() as conn:
            return conn.execute(sql, params).fetchone()

    def fetch_all(self, sql, params=()) -> list:
        with self._connection() as conn:
            return conn.execute(sql, params).fetchall()

    fetch_tuples = fetch_all  # its rows are tuples already

    def _one_statement(self) -> AbstractContextManager[_Connection]:
        """Autocommit, where the statement is a transaction of its own: one round trip instead of three
        (inside this thread's transaction it joins that one)."""
        return self._connection()
