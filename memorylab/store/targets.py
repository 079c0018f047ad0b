"""Which database is opened when none is named, and whether a named one is there to be read.

The command line and the lab open the same database by default, so what ``memorylab import`` brought
in is what the lab shows.
"""
import os
from pathlib import Path

from ..errors import NotFoundError
from .core import is_postgres_url

DEFAULT_DATABASE = "lab.db"


def default_database() -> str:
    """``$MEMORYLAB_DB`` (a SQLite file or a PostgreSQL URL), else ``lab.db`` in the working folder."""
    return os.environ.get("MEMORYLAB_DB") or DEFAULT_DATABASE


def database_exists(target) -> bool:
    """Whether opening ``target`` would find a database rather than create one: a SQLite file that is
    there (a server's database, or ``:memory:``, is taken to be; the server says otherwise)."""
    if is_postgres_url(target) or str(target) in (":memory:", ""):
        return True
    return Path(target).expanduser().is_file()


def require_database(target) -> None:
    """Refuse a SQLite file that does not exist, before anything opens (and so creates) it."""
    if not database_exists(target):
        raise NotFoundError(f"no database at {str(target)!r}: the file does not exist, and nothing was created")
