"""Storage. ``Store(target)`` opens SQLite (a path) or PostgreSQL (a URL); everything else reaches
the database through its repositories (``store.sessions``, ``store.kv``, ...). A session may also
live in a ``SessionStorage`` of its own (``InMemorySessionStorage``; ``Session.over(storage)``)."""
from .agents import ANY_STATUS
from .core import ALL_TENANTS, SNIPPET_MARKS, SearchEngine, Store, is_postgres_url
from .in_memory import InMemorySessionStorage
from .protocols import Outlines, PagedBranchReads, SessionStorage, TreeQueries
from .sessions import LATEST_LEAF
from .targets import DEFAULT_DATABASE, database_exists, default_database, require_database

__all__ = ["ALL_TENANTS", "ANY_STATUS", "DEFAULT_DATABASE", "LATEST_LEAF", "SNIPPET_MARKS", "InMemorySessionStorage",
           "Outlines", "PagedBranchReads", "SearchEngine", "SessionStorage", "Store", "TreeQueries", "database_exists",
           "default_database", "is_postgres_url", "require_database"]
