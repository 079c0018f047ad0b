"""Storage. ``Store`` is the SQLite backend; session logic only calls its methods."""
from .sqlite import LATEST_LEAF, Store

__all__ = ["LATEST_LEAF", "Store"]
