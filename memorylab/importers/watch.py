"""Following transcripts as an agent writes them: what a file gains is imported as it grows.

``watch_sources(store, paths)`` polls files and folders (every ``interval`` seconds) and keeps one
``Follower`` per file. A follower runs the file's format reader once, in a thread of its own, over
the lines of the file as they are written (``source.following`` hands them to ``json_lines``): at the
end of what the file holds the reader waits for more instead of ending, so its state (open responses,
the tail a line hangs on, line numbers) goes on, no line is read twice, and what it yields is written
as it comes. The store ends up as a one-shot import of the whole file leaves it, once the watch stops
(a response is written once the line after it shows it complete, or when the watch stops, as an import
of the file at its end would). A line is read once its newline is written.

A reader that yields nothing until it has read the whole file (its sessions are rebuilt from all of
its lines, as an OTLP file's are) is run over what the file holds, and again over each part it gains,
from where the last run stopped. A reader that does not read lines (a SQLite or a whole-JSON file) is
run again when the file changes. A file that shrinks or is replaced is read anew from its start (what
the store holds already is skipped). A file that cannot be read (a malformed line) is reported, and
the watch goes on with the others.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import ImportFormatError, InvalidInputError, MemoryLabError
from ..store.sqlite import writes_over
from . import detect_format, source_files
from .formats import PROBE_BYTES, SourceFormat
from .source import SourceMessage, SourceSession, following
from .writer import ImportReport, write_sessions

INTERVAL = 0.5
"""Seconds between two looks at the watched files."""


class _Growth:
    """What a follower's thread and the watcher tell each other: the watcher wakes the reader when the
    file grew and waits until it has read to the end again (``settle``) or finished; only then does it
    read what the reader yielded, so the two never touch a session at once."""

    def __init__(self):
        self.condition = threading.Condition()
        self.wakes, self.idle_at = 0, -1
        self.ending = self.done = False
        self.offset, self.line = 0, 0  # past the last complete line any stream read

    def wait_for_more(self):
        """Called by a stream at the end of the file: wait until woken, or told to end."""
        with self.condition:
            self.idle_at = self.wakes
            self.condition.notify_all()
            self.condition.wait_for(lambda: self.wakes != self.idle_at or self.ending)

    def reached(self, offset, line):
        self.offset, self.line = max(self.offset, offset), max(self.line, line)

    def settle(self, wake=True):
        """Wake the reader (``wake``) and wait until it waits at the end of the file again, or finished."""
        with self.condition:
            if wake:
                self.wakes += 1
                self.condition.notify_all()
            self.condition.wait_for(lambda: self.idle_at == self.wakes or self.done)

    def end(self):
        """Tell the reader the file ends where it is, and wait until it finished."""
        with self.condition:
            self.ending = True
            self.condition.notify_all()
            self.condition.wait_for(lambda: self.done)

    def finished(self):
        with self.condition:
            self.done = True
            self.condition.notify_all()


def _lines(path, growth: _Growth, start: int, first_line: int):
    """(line number, bytes) of each complete line from ``start`` on, waiting at the end for more."""
    with open(path, "rb") as file:
        file.seek(start)
        number, partial = first_line - 1, b""
        while True:
            line = file.readline()
            if line.endswith(b"\n"):
                number += 1
                growth.reached(file.tell(), number)
                yield number, partial + line
                partial = b""
                continue
            partial += line
            if growth.ending:
                return
            growth.wait_for_more()


@dataclass
class _Stored:
    """Where a conversation of the file went: its memorylab session, and the last message written
    there, sent again first with the next messages so that one following it (``PREVIOUS``) hangs on it."""

    session_id: str
    last: SourceMessage


@dataclass
class _Run:
    """One run of a reader over the file (from ``start``), in a thread; what it yielded, not yet written."""

    follower: Follower
    start: int = 0
    first_line: int = 1
    growth: _Growth = field(default_factory=_Growth)
    read_lines: bool = False
    sessions: list[SourceSession] = field(default_factory=list)
    yielded: list[tuple[SourceSession, SourceMessage]] = field(default_factory=list)
    error: BaseException | None = None

    def __post_init__(self):
        self.growth.offset, self.growth.line = self.start, self.first_line - 1

    def begin(self):
        threading.Thread(target=self._read, name=f"memorylab watch {self.follower.path.name}", daemon=True).start()
        self.growth.settle(wake=False)

    def _lines_of(self, path):
        if Path(path) != self.follower.path:
            return None
        self.read_lines = True
        return _lines(path, self.growth, self.start, self.first_line)

    def _read(self):
        following.set(self._lines_of)
        try:
            for session in self.follower.format.read(self.follower.path):
                self.sessions.append(session)
                for message in session.messages:
                    self.yielded.append((session, message))
        except BaseException as error:  # reported by the watcher, in its own thread
            self.error = error
        finally:
            self.growth.finished()

    def unwritten(self) -> list[tuple[SourceSession, list[SourceMessage]]]:
        """The sessions yielded so far, each with its messages not yet written (the reader is waiting)."""
        by_session = {id(s): (s, []) for s in self.sessions}
        for session, message in self.yielded:
            by_session[id(session)][1].append(message)
        return list(by_session.values())


class Follower:
    """One watched file: its format, the run reading it, and where its conversations went."""

    def __init__(self, watcher: Watcher, path: Path, source_format: SourceFormat):
        self.watcher, self.path, self.format = watcher, path, source_format
        self.stored: dict[str, _Stored] = {}
        self.identity = _identity(path)
        self.mode = "live"  # "live": one run for ever; "parts": a run per part gained; "whole": re-read on change
        self.run: _Run | None = None
        self.failed = False

    def start(self):
        self._begin(_Run(self))
        if self.run.growth.done:
            self.mode = "whole" if not self.run.read_lines else "parts"
            self._finish_run()
        else:
            self._write()

    def _begin(self, run):
        self.run = run
        self.identity = _identity(self.path)
        run.begin()

    def poll(self):
        """Import what the file gained since the last look."""
        identity = _identity(self.path)
        if identity == self.identity:
            if self.mode == "live" and not self.run.sessions and not self.failed:
                self.mode = "parts"  # read to the end, and still nothing: it reads the whole file first
                self._finish_run()
            return
        if identity is None or identity[:2] != self.identity[:2] or identity[2] < self.identity[2]:
            self.stop()  # gone, replaced or cut: a file watched anew
            self.watcher.forget(self.path)
            return
        if self.failed:
            return
        if self.mode == "live":
            self.identity = identity
            self.run.growth.settle()
            self._write()
        else:
            growth = self.run.growth if self.mode == "parts" else _Growth()
            self._begin(_Run(self, growth.offset, growth.line + 1))
            self._finish_run()

    def _finish_run(self):
        self.run.growth.end()
        self._write(final=True)

    def stop(self):
        """End the live run where the file ends now, and write what it gives then."""
        if self.run is not None and not self.run.growth.done and not self.failed:
            self._finish_run()

    def _write(self, final=False):
        """Write what the run yielded since the last write (at its end, each session's title and
        metadata too), then report the import, or the reader's error."""
        run = self.run
        written = len(run.yielded)
        batch = [b for b in (self._batch(s, messages, final) for s, messages in run.unwritten()) if b.messages]
        try:
            report = self.watcher.write(self.path, self.format, batch)
        except MemoryLabError as error:
            return self._fail(error)
        del run.yielded[:written]
        for session, result in zip(batch, report.sessions):
            self.stored[session.source_id] = _Stored(result.session_id, session.messages[-1])
        if report.messages_added or report.overlays_added:
            self.watcher.imported(report)
        if run.error is not None:
            self._fail(run.error)

    def _fail(self, error):
        self.failed = True
        self.watcher.problem(self.path, error)

    def _batch(self, session: SourceSession, messages: list[SourceMessage], final) -> SourceSession:
        """The session as the writer takes it now: its new messages, after the last one written (so
        that at the end, with none new, its title and metadata are written still)."""
        snapshot = replace(session, messages=messages, metadata=dict(session.metadata),
                           overlays=list(session.overlays))
        stored = self.stored.get(session.source_id)
        if stored is None:
            return snapshot
        anchored = [stored.last, *messages] if messages or final else []
        return replace(snapshot, messages=anchored, session_id=stored.session_id, opening_span=0)


def _identity(path):
    """(device, inode, size, modified) of the file, None when it is gone."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


class Watcher:
    """The files under watch and what to do with what they gain; ``poll`` looks at each once."""

    def __init__(self, store, paths: Iterable, *, agent_id=None, tenant_id="default",
                 on_import: Callable[[ImportReport], None] | None = None,
                 on_problem: Callable[[Path, str], None] | None = None):
        self.store, self.agent_id, self.tenant_id = store, agent_id, tenant_id or "default"
        self.paths = [Path(p) for p in paths]
        for path in self.paths:
            if not path.exists():
                raise InvalidInputError(f"{path}: no such file or folder to watch")
        self.on_import, self.on_problem = on_import, on_problem
        self.followers: dict[Path, Follower] = {}
        self.unreadable: dict[Path, tuple | None] = {}  # files of no format yet, by the identity they had
        self.starting: dict[Path, tuple | None] = {}  # files without a line yet, by the identity they had

    def files(self) -> list[Path]:
        """The files watched now: those named, and those under the folders named, but the store's own."""
        found = []
        for path in self.paths:
            found.extend(source_files(path) if path.is_dir() else [path] if path.is_file() else [])
        return [path for path in found if path in self.followers or not writes_over(self.store.path, path)]

    def poll(self):
        for path in self.files():
            follower = self.followers.get(path)
            if follower is not None:
                follower.poll()
            else:
                self._follow(path)

    def _follow(self, path):
        identity = _identity(path)
        if path in self.unreadable and self.unreadable[path] == identity or not self._begun(path, identity):
            return
        try:
            chosen = detect_format(path)
            if chosen.whole_sessions:
                raise ImportFormatError(f"{path}: {chosen.label} holds whole sessions, which grow by no lines; "
                                        "import it with `memorylab import`")
        except ImportFormatError as error:
            if identity is not None and identity[2] and path not in self.unreadable:
                self.problem(path, error)
            self.unreadable[path] = identity
            return
        self.unreadable.pop(path, None)
        self.followers[path] = follower = Follower(self, path, chosen)
        follower.start()

    def _begun(self, path, identity) -> bool:
        """Whether the file holds enough to be told: a complete first line (a line being written may be
        cut anywhere), SQLite's header, or else the same bytes as at the last look (written whole)."""
        with open(path, "rb") as file:
            head = file.read(PROBE_BYTES)
        if b"\n" in head or head.startswith(b"SQLite format 3\x00"):
            return True
        settled, self.starting[path] = self.starting.get(path) == identity, identity
        return settled and bool(head)

    def forget(self, path):
        self.followers.pop(path, None)

    def write(self, path, source_format, sessions) -> ImportReport:
        return write_sessions(self.store, sessions, source=path, format_name=source_format.name,
                              agent_id=self.agent_id or source_format.agent_id, tenant_id=self.tenant_id)

    def imported(self, report):
        if self.on_import:
            self.on_import(report)

    def problem(self, path, error):
        """Tell of a file that cannot be read; what it held before the place named is imported."""
        if self.on_problem:
            message = str(error).removesuffix("; nothing was imported")
            self.on_problem(path, message if isinstance(error, MemoryLabError) else f"{path}: {error!r}")

    def close(self):
        """Stop every follower: what their files hold now is written, as an import of them would."""
        for follower in list(self.followers.values()):
            follower.stop()


def watch_sources(store, paths, *, interval=INTERVAL, stop: threading.Event | None = None, **options):
    """Import what the files and folders at ``paths`` gain, every ``interval`` seconds, until ``stop`` is
    set (or Ctrl-C). ``options`` are ``Watcher``'s: ``agent_id``, ``tenant_id``, ``on_import(report)``
    after each write, ``on_problem(path, message)`` for a file that cannot be read, whose watch ends."""
    watcher = Watcher(store, paths, **options)
    stop = stop or threading.Event()
    try:
        while not stop.is_set():
            watcher.poll()
            stop.wait(interval)
    finally:
        watcher.close()
