"""Storage. ``Store(target)`` opens SQLite (a path) or PostgreSQL (a URL); session logic only calls its methods."""
from .core import ALL_TENANTS, LATEST_LEAF, SNIPPET_MARKS, Store, is_postgres_url

__all__ = ["ALL_TENANTS", "LATEST_LEAF", "SNIPPET_MARKS", "Store", "is_postgres_url"]
