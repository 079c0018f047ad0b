"""Storage. ``Store(target)`` opens SQLite (a path) or PostgreSQL (a URL); everything else reaches
the database through its repositories (``store.sessions``, ``store.kv``, ...)."""
from .agents import ANY_STATUS
from .core import ALL_TENANTS, SNIPPET_MARKS, SearchEngine, Store, is_postgres_url
from .protocols import SessionStorage
from .sessions import LATEST_LEAF

__all__ = ["ALL_TENANTS", "ANY_STATUS", "LATEST_LEAF", "SNIPPET_MARKS", "SearchEngine", "SessionStorage", "Store",
           "is_postgres_url"]
