"""The formats memorylab imports, and telling them apart by their content.

A format is a ``SourceFormat``: a name for ``--format``, a label for people, the agent its sessions
are filed under unless the caller names one (None: the agents the source names), a ``detect`` that
looks at a ``SourceProbe``, a ``read`` that yields ``SourceSession`` objects from a path, and whether
those sessions are written whole (``source.WholeSession``: a session id of the caller's and
``replace`` apply) or merged into what the store holds.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..errors import ImportFormatError
from ..store.sqlite import wal_is_empty
from .source import SourceSession, loads
from .spool import watch

PROBE_BYTES = 256 * 1024
PROBE_LINES = 8


def open_readonly(path) -> sqlite3.Connection:
    """A connection to a SQLite source that cannot write to it. Shareable across threads: a reader
    abandoned mid-import may be closed by whichever thread collects its generator. Text that is not
    UTF-8 reads as bytes, for the reader to refuse by row rather than the cursor for the whole table.

    Reading a WAL database starts its shared-memory index beside it; where that cannot be written (a
    read-only mount) and the file holds every change, it is read as it lies on disk (``immutable``);
    one whose log holds changes is refused, saying how to read it."""
    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    conn = _connect(uri)
    try:
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1")
    except sqlite3.OperationalError as error:
        conn.close()
        if not _in_wal_mode(path):
            raise
        if not wal_is_empty(path):
            raise ImportFormatError(
                f"{path}: cannot read it here ({error}): its write-ahead log ({Path(path).name}-wal) holds changes "
                "SQLite reads only with its index (-shm), which this folder cannot hold; copy the file and its "
                "-wal to a writable folder and import the copy") from None
        conn = _connect(f"{uri}&immutable=1")
    return conn


def _in_wal_mode(path) -> bool:
    """Whether the database header says WAL (its read and write versions are 2)."""
    with open(path, "rb") as file:
        return file.read(20)[18:20] == b"\x02\x02"


def _connect(uri):
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    conn.text_factory = _text_or_bytes
    watch(conn)
    return conn


def _text_or_bytes(data: bytes):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


@dataclass(frozen=True)
class SourceFormat:
    name: str
    label: str
    agent_id: str | None
    detect: Callable[[SourceProbe], bool]
    read: Callable[[Path], Iterator[SourceSession]]
    whole_sessions: bool = False


class SourceProbe:
    """What detection may look at, each read at most once: the first bytes of the file, the tables of
    a SQLite database, and the first JSON values of a text file (one per line, or the whole head)."""

    def __init__(self, path):
        self.path = Path(path)

    @cached_property
    def head(self) -> bytes:
        with open(self.path, "rb") as file:
            return file.read(PROBE_BYTES)

    @cached_property
    def is_sqlite(self) -> bool:
        return self.head.startswith(b"SQLite format 3\x00")

    @cached_property
    def tables(self) -> frozenset[str]:
        """The table names of a SQLite file (empty for anything else), read without writing to it."""
        if not self.is_sqlite:
            return frozenset()
        try:
            conn = open_readonly(self.path)
            try:
                return frozenset(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
            finally:
                conn.close()
        except sqlite3.Error:
            return frozenset()

    @cached_property
    def text(self) -> str | None:
        """The head as text, or None for a binary file."""
        if self.is_sqlite or b"\x00" in self.head:
            return None
        try:
            return self.head.decode("utf-8")
        except UnicodeDecodeError as error:
            # The head may end inside a multi-byte character.
            return self.head[:error.start].decode("utf-8") if error.start > len(self.head) - 4 else None

    @cached_property
    def json_lines(self) -> list:
        """The JSON values of the first complete non-empty lines (a line that does not parse ends the list)."""
        values = []
        lines = (self.text or "").splitlines()
        if len(self.head) == PROBE_BYTES:
            lines = lines[:-1]  # the last line may be cut off
        for line in lines:
            if not line.strip():
                continue
            try:
                values.append(loads(line))
            except ValueError:
                break
            if len(values) == PROBE_LINES:
                break
        return values

    @cached_property
    def whole_json(self):
        """The file parsed as one JSON document when it fits in the probe, else None."""
        if self.text is None or len(self.head) == PROBE_BYTES:
            return None
        try:
            return loads(self.text)
        except ValueError:
            return None

    @property
    def first_char(self) -> str:
        return (self.text or "").lstrip()[:1]
