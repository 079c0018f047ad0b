"""Reading a source before anything is written: within a budget, into a spool on disk.

A source is read whole before the import's write transaction begins, so that a source which never
ends (a SQLite view that recurses forever, or one that fills the disk with temporary files) holds no
lock other writers wait for, and is stopped. The messages go to a temporary file as they are read,
one at a time, so memory does not grow with the source; the writer then replays them in one
transaction, so one import is still all or nothing.

``ReadBudget`` bounds the reading: ``seconds`` of it, and ``max_bytes`` of disk, the spool and the
temporary files SQLite makes for the source's queries together (those are measured where the system
shows a process its open files, as Linux does). Its defaults come from ``MEMORYLAB_IMPORT_MAX_SECONDS``
and ``MEMORYLAB_IMPORT_MAX_BYTES``. A SQLite source's queries run under a progress handler that stops
them when the budget is spent, and on Ctrl-C, which SQLite would otherwise not hear until its query ended.
"""
from __future__ import annotations

import contextvars
import os
import pickle
import sqlite3
import tempfile
import time
from dataclasses import dataclass, replace

from ..errors import ImportFormatError, InvalidInputError
from .source import PREVIOUS, SourceMessage, SourceSession, damaged_source_error, source_error

DEFAULT_SECONDS = 600.0
DEFAULT_BYTES = 8 * 1024 ** 3
SECONDS_VARIABLE = "MEMORYLAB_IMPORT_MAX_SECONDS"
BYTES_VARIABLE = "MEMORYLAB_IMPORT_MAX_BYTES"
PROGRESS_STEPS = 20_000
"""SQLite virtual machine steps between two calls of the progress handler (a few milliseconds)."""
SIZE_CHECK_SECONDS = 0.1
SQLITE_TEMP_PREFIX = "etilqs_"
"""How SQLite names its temporary files (unlinked as soon as they are open)."""

_reading: contextvars.ContextVar[_Reading | None] = contextvars.ContextVar("memorylab_source_reading", default=None)


@dataclass(frozen=True)
class ReadBudget:
    """How long reading a source may take, and how much disk it may fill, before the import is refused."""

    seconds: float = DEFAULT_SECONDS
    max_bytes: int = DEFAULT_BYTES

    @classmethod
    def configured(cls, seconds=None, max_bytes=None) -> ReadBudget:
        """The budget given, else the one the environment sets, else the defaults."""
        return cls(seconds=_setting(seconds, SECONDS_VARIABLE, float, DEFAULT_SECONDS),
                   max_bytes=_setting(max_bytes, BYTES_VARIABLE, int, DEFAULT_BYTES))


def _setting(given, variable, kind, default):
    raw = given if given is not None else os.environ.get(variable)
    if raw is None:
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise InvalidInputError(f"the import's read budget must be a positive number, got {raw!r}"
                                f"{f' (from ${variable})' if given is None else ''}")
    return value


def watch(conn: sqlite3.Connection) -> None:
    """Hold a SQLite source's queries to the budget of the read under way (none: nothing to do)."""
    reading = _reading.get()
    if reading is not None:
        conn.execute("PRAGMA temp_store = FILE")  # where the size check can see it
        conn.set_progress_handler(reading.spent, PROGRESS_STEPS)


class _Reading:
    """One source's read: its deadline, the bytes spooled so far, and why it was stopped, if it was."""

    def __init__(self, source, budget: ReadBudget):
        self.source, self.budget = source, budget
        self.deadline = time.monotonic() + budget.seconds
        self.next_size_check = 0.0
        self.spooled = 0
        self.stopped: str | None = None

    def spent(self) -> int:
        """The progress handler: non-zero stops the query."""
        now = time.monotonic()
        if now >= self.deadline:
            self.stopped = f"reading it took longer than {self.budget.seconds:g} s"
        elif now >= self.next_size_check:
            self.next_size_check = now + SIZE_CHECK_SECONDS
            used = self.spooled + sqlite_temp_bytes()
            if used > self.budget.max_bytes:
                self.stopped = f"reading it filled more than {self.budget.max_bytes:,} bytes of disk"
        return 1 if self.stopped else 0

    def check(self):
        if self.spent():
            raise self.refusal()

    def refusal(self) -> ImportFormatError:
        return source_error(self.source, "", f"{self.stopped} (a view or query that never ends?). If it is "
                                             f"this large, raise the budget: --max-read-seconds / ${SECONDS_VARIABLE}, "
                                             f"--max-read-bytes / ${BYTES_VARIABLE}")


def sqlite_temp_bytes() -> int:
    """Disk held by SQLite's temporary files in this process; 0 where the system does not list open files."""
    total = 0
    try:
        descriptors = os.listdir("/proc/self/fd")
    except OSError:
        return 0
    for fd in descriptors:
        try:
            if SQLITE_TEMP_PREFIX in os.readlink(f"/proc/self/fd/{fd}"):
                total += os.stat(f"/proc/self/fd/{fd}").st_blocks * 512
        except OSError:  # closed since it was listed
            continue
    return total


def spool(read, path, source, budget: ReadBudget) -> Spool:
    """Every session ``read(path)`` yields, spooled to disk within ``budget``. ``source`` names the file
    in errors. KeyboardInterrupt stops a SQLite query too."""
    reading = _Reading(source, budget)
    spooled = Spool()
    token = _reading.set(reading)
    reader = iter(read(path))
    try:
        for session in reader:
            spooled.add(session, reading)
    except BaseException as error:
        spooled.close()
        if reading.stopped:
            raise reading.refusal() from None
        if _interrupted(error):  # Ctrl-C inside the progress handler: sqlite3 swallows it and says "interrupted"
            raise KeyboardInterrupt from None
        if isinstance(error, sqlite3.Error):
            raise damaged_source_error(source, error) from None
        raise
    finally:
        getattr(reader, "close", lambda: None)()
        _reading.reset(token)
    return spooled


def _interrupted(error) -> bool:
    while error is not None:
        if isinstance(error, sqlite3.OperationalError) and str(error) == "interrupted":
            return True
        error = error.__cause__ or error.__context__
    return False


class Spool:
    """The sessions of a source as read: their messages in a temporary file, the rest in memory."""

    def __init__(self):
        self.file = tempfile.TemporaryFile(prefix="memorylab-import-")
        self.sessions: list[tuple[SourceSession, int]] = []

    def add(self, session: SourceSession, reading: _Reading):
        """Spool the session's messages, then keep what a reader fills in while they are read."""
        count = 0
        messages = iter(session.messages)
        try:
            for item in messages:
                self.file.write(_pickled(item, reading.source))
                count += 1
                reading.spooled = self.file.tell()
                reading.check()
        finally:
            getattr(messages, "close", lambda: None)()
        self.sessions.append((replace(session, messages=()), count))

    def replay(self):
        """The spooled sessions, each with its messages read back from the file."""
        self.file.seek(0)
        for session, count in self.sessions:
            session.messages = self._messages(count)
            yield session

    def _messages(self, count):
        for _ in range(count):
            message, follows, parent_id, where, reader_keys = pickle.load(self.file)
            yield SourceMessage(message, PREVIOUS if follows else parent_id, where, reader_keys)

    def close(self):
        self.file.close()


def _pickled(item: SourceMessage, source) -> bytes:
    """One message as the spool keeps it; the PREVIOUS marker as a flag (pickling would copy it)."""
    follows = item.parent_id is PREVIOUS
    try:
        return pickle.dumps((item.message, follows, None if follows else item.parent_id, item.where,
                             item.reader_keys), protocol=pickle.HIGHEST_PROTOCOL)
    except RecursionError:
        raise source_error(source, item.where, "expected a message nested less deeply than Python recurses") from None
