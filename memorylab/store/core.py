"""A memorylab database: a backend's connections plus one repository per concept.

``Store(target)`` opens a backend chosen by ``target``: a ``postgresql://`` URL gives a
``PostgresStore``, anything else a ``SQLiteStore`` file (``":memory:"`` included). A backend
provides connections, transactions and its ``dialect``, nothing else. The SQL lives in the
repositories (``store.sessions``, ``store.kv``, ...), written once in what both engines speak
(``?``/``:name`` parameters, ``RETURNING``, ``ON CONFLICT``, recursive CTEs), asking
``store.dialect`` where the engines part. Their interfaces are written down in
``memorylab.store.protocols``; nothing outside this package writes SQL.
"""
from contextlib import AbstractContextManager
from functools import cached_property
from typing import Any

from ..errors import InvalidInputError, MemoryLabError
from ..shapes import SearchHits
from ..validation import check_identifier
from .agents import AgentDirectory
from .bulk import BulkCopy
from .context import SearchEntries
from .dialect import SNIPPET_MARKS, Dialect, SearchEngine
from .experiments import ExperimentRecords
from .integrity import Integrity
from .kv import KVEntries
from .longterm import LongTermRecords
from .sessions import SqlSessionCatalog

__all__ = ["ALL_TENANTS", "SNIPPET_MARKS", "SearchEngine", "Store", "is_postgres_url"]

ALL_TENANTS = object()
"""``tenant_id`` of a ``search`` over every tenant (the lab's admin view). Never a default: a search
names its tenant, so no caller crosses tenants by leaving it out."""

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target) -> bool:
    return isinstance(target, str) and target.startswith(POSTGRES_SCHEMES)


class Store:
    """A memorylab database: ``Store("lab.db")``, ``Store(":memory:")`` or
    ``Store("postgresql://user@host/db")``.

    Its repositories: ``sessions`` (each session's tree, overlays, status and blocks, through
    ``sessions.storage(pk)``), ``entries`` (searchable block entries), ``kv``, ``agents`` (and the
    memory manager's listing), ``long_term``, ``experiments``, ``integrity`` (``memorylab check``) and ``bulk``
    (``memorylab copy``). ``search`` finds messages across sessions.
    """

    # -- what each backend provides ------------------------------------------------------------
    # dialect; path; transaction() / snapshot(): context managers yielding a connection with
    # execute/executemany; fetch_one / fetch_all / fetch_tuples: single reads; close(); db; write_one.
    # It may override _one_statement, _INTEGRITY, _BULK and read_only.

    dialect: Dialect
    """What this backend's engine does differently (``memorylab.store.dialect``)."""
    path: str
    """Where the database is, safe to show (a URL without its password)."""
    _INTEGRITY = Integrity
    _BULK = BulkCopy

    @property
    def read_only(self) -> bool:
        """Whether this store only reads: its writes raise ``StoreReadOnlyError`` (``StoreFullError`` when
        a full disk is why), its reads work. A SQLite file opens so when asked, when write-protected, or
        when its disk is full."""
        return False

    def __new__(cls, target=":memory:", **options):
        if cls is Store:
            if is_postgres_url(target):
                try:
                    from .postgres import PostgresStore as cls
                except ImportError as error:
                    raise MemoryLabError(f"a PostgreSQL store needs psycopg 3 and its pool ({error}): "
                                         "pip install 'memorylab[postgres]'") from None
            else:
                from .sqlite import SQLiteStore as cls
        return super().__new__(cls)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"{type(self).__name__}({self.path!r})"

    @property
    def search_engine(self) -> SearchEngine:
        return self.dialect.search_engine

    def transaction(self) -> AbstractContextManager[Any]:
        """A write transaction yielding its connection; nested calls join the outer one."""
        raise NotImplementedError

    def snapshot(self) -> AbstractContextManager[Any]:
        """A read transaction: its reads see one state of the database; inside this thread's
        transaction or snapshot it joins that one."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the backend's connections; the store cannot be used after."""
        raise NotImplementedError

    def fetch_one(self, sql, params=()) -> Any:
        """The first row of one read (by position or column name), in this thread's transaction or snapshot."""
        raise NotImplementedError

    def fetch_all(self, sql, params=()) -> list:
        """Every row of one read (by position or column name)."""
        raise NotImplementedError

    def fetch_tuples(self, sql, params=()) -> list[tuple]:
        """Every row of one read as a plain tuple, for reads of thousands of rows unpacked by position."""
        raise NotImplementedError

    def write_one(self, sql, params=()) -> Any:
        """Run one statement that writes and return its first row (None without one), in this thread's
        transaction or a new one."""
        with self._one_statement() as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchone() if cursor.description else None

    def _one_statement(self):
        """Where ``write_one`` runs: a write transaction. A single statement is atomic by itself, so a
        backend may spare the transaction around it (PostgreSQL: the BEGIN and COMMIT round trips)."""
        return self.transaction()

    # -- repositories ----------------------------------------------------------------------------

    @cached_property
    def sessions(self) -> SqlSessionCatalog:
        return SqlSessionCatalog(self)

    @cached_property
    def entries(self) -> SearchEntries:
        return SearchEntries(self)

    @cached_property
    def kv(self) -> KVEntries:
        return KVEntries(self)

    @cached_property
    def agents(self) -> AgentDirectory:
        return AgentDirectory(self)

    @cached_property
    def long_term(self) -> LongTermRecords:
        return LongTermRecords(self)

    @cached_property
    def experiments(self) -> ExperimentRecords:
        return ExperimentRecords(self)

    @cached_property
    def integrity(self) -> Integrity:
        return self._INTEGRITY(self)

    @cached_property
    def bulk(self) -> BulkCopy:
        return self._BULK(self)

    # -- search across sessions -------------------------------------------------------------------

    def search(self, query, *, tenant_id, limit=20, session_pk=None, agent_id=None, roles=None) -> SearchHits:
        """Ranked full-text hits over text parts of ``tenant_id`` (or ``ALL_TENANTS``); any string is
        safe, an empty one finds nothing.

        Each hit has a ``snippet``: the best-matching fragment with the matched words between
        ``SNIPPET_MARKS``, for highlighting.
        """
        if tenant_id is ALL_TENANTS:
            tenant_id = None
        elif tenant_id is None:
            raise InvalidInputError("tenant_id is None: name the tenant to search, or pass ALL_TENANTS to "
                                    "search every tenant")
        else:
            check_identifier(tenant_id, "tenant id")
        found = self.dialect.full_text("messages", query)
        if found is None or limit <= 0:
            return SearchHits()
        fts, match = found
        where, params = [fts.condition], {"match": match, "limit": int(limit)}
        for column, key, value in (("m.session_pk", "pk", session_pk), ("s.tenant_id", "tenant", tenant_id),
                                   ("s.agent_id", "agent", agent_id)):
            if value is not None:
                where.append(f"{column} = :{key}")
                params[key] = value
        if roles:
            params.update({f"role{i}": role for i, role in enumerate(roles)})
            where.append(f"m.role IN ({', '.join(f':role{i}' for i in range(len(roles)))})")
        rows = self.fetch_all(
            f"""SELECT m.id, m.role, m.text, m.created_at, s.session_id, s.tenant_id, s.agent_id,
                   {fts.rank} AS rank, {fts.snippet} AS snippet
            FROM {fts.source} JOIN sessions s ON s.pk = m.session_pk
            WHERE {" AND ".join(where)} ORDER BY rank, m.seq LIMIT :limit""",
            params,
        )
        return SearchHits(
            {
                "id": r["id"], "role": r["role"], "content": r["text"], "created_at": r["created_at"],
                "session_id": r["session_id"], "tenant_id": r["tenant_id"], "agent_id": r["agent_id"],
                "rank": r["rank"], "snippet": r["snippet"],
            }
            for r in rows
        )
