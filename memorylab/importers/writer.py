"""Writing what an importer read into a store: one transaction per import, nothing twice.

``write_sessions`` validates every message the way an append would (``normalize_message``, the row
size limit, token estimates), checks that each parent exists, and writes in batches. A message whose
id the session already holds is skipped, so importing a source again adds only what it gained since;
a conversation goes only into a session that opened as it opens, so another source's namesake gets
a session of its own (``id~2``). A whole session (``source.WholeSession``, a memorylab export) is
written as it is instead: under its own id (or the caller's), never merged, replacing a stored one
only when asked.
Any error rolls the whole import back; a dry run rolls back on purpose and reports what it would add.
A SQLite source that fails while it is read is refused as a damaged source, never taken for damage to
the store.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain, count, islice

from ..errors import ConflictError, MemoryLabError
from ..history.truncation import enforce_row_size_limit
from ..messages import normalized_and_measured, to_utc_iso, utc_now_iso
from ..tokens import estimate_message_tokens
from ..validation import check_identifier, is_integer
from .reserved import without_claimed_keys
from .source import PREVIOUS, SourceSession, StoredParent, damaged_source_error, source_error

BATCH = 1000
"""Messages per insert statement batch, and how often ``progress`` is called."""


@dataclass
class SessionImport:
    """What one conversation of the source gave: found in the source, added to the store."""

    session_id: str
    agent_id: str
    title: str | None
    messages_found: int = 0
    messages_added: int = 0
    branches: int = 0
    overlays_found: int = 0
    overlays_added: int = 0
    existed: bool = False
    replaced: bool = False

    @property
    def status(self) -> str:
        if self.replaced:
            return "replaced"
        if not self.existed:
            return "new"
        return "grew" if self.messages_added or self.overlays_added else "unchanged"


@dataclass
class ImportReport:
    source: str
    format: str
    dry_run: bool = False
    sessions: list[SessionImport] = field(default_factory=list)

    @property
    def messages_found(self) -> int:
        return sum(s.messages_found for s in self.sessions)

    @property
    def messages_added(self) -> int:
        return sum(s.messages_added for s in self.sessions)

    @property
    def overlays_added(self) -> int:
        return sum(s.overlays_added for s in self.sessions)

    def __str__(self):
        verb = "would add" if self.dry_run else "added"
        lines = [
            f"{self.source} ({self.format}): {len(self.sessions)} session(s), {self.messages_found:,} messages found; "
            f"{verb} {self.messages_added:,} messages and {self.overlays_added:,} overlays"
        ]
        for s in self.sessions:
            lines.append(
                f"  {s.session_id} (agent {s.agent_id}): {s.status}, {s.messages_added:,} of "
                f"{s.messages_found:,} messages, {s.branches} branch(es), {s.overlays_added} of "
                f"{s.overlays_found} overlay(s)"
            )
        return "\n".join(lines)


class _DryRun(Exception):
    """Raised inside the import's transaction to roll a dry run back."""


def write_sessions(store, sessions: Iterable[SourceSession], *, source, format_name, agent_id, tenant_id="default",
                   dry_run=False, progress: Callable[[int], None] | None = None, session_id=None,
                   replace=False) -> ImportReport:
    """Write every ``SourceSession`` into ``store`` in one transaction and report what was added.

    ``agent_id`` None files each session under the agent it names. ``session_id`` and ``replace``
    apply to whole sessions: the id to write one under, and whether it replaces a stored namesake."""
    run = _Import(store, source, format_name, check_identifier(tenant_id, "tenant id"),
                  None if agent_id is None else check_identifier(agent_id, "agent id"), progress,
                  None if session_id is None else check_identifier(session_id, "session id"), replace)
    report = ImportReport(source=str(source), format=format_name, dry_run=dry_run)
    sessions = _read_source(sessions, source)
    try:
        with _rolled_back(store) if dry_run else store.transaction():
            for source_session in sessions:
                result = run.session(source_session)
                if result is not None:
                    report.sessions.append(result)
            run.finish()
        if not dry_run:
            store.sessions.settle_search(report.messages_added)
    finally:
        _close(sessions)
    return report


@contextmanager
def _rolled_back(store):
    """A transaction rolled back at its end: a dry run makes every check, and every refusal, of the
    write it stands for, and leaves the store as it was."""
    try:
        with store.transaction():
            yield
            raise _DryRun
    except _DryRun:
        pass


def _read_source(items, source):
    """``items`` as they are read from the source, where a SQLite error raised by reading them (a
    damaged page of a source database) is an ImportFormatError naming the source: inside the store's
    transaction it would otherwise read as the store's own failure."""
    items = iter(items)
    try:
        while True:
            try:
                item = next(items)
            except StopIteration:
                return
            except sqlite3.Error as error:
                raise damaged_source_error(source, error) from None
            yield item
    finally:
        _close(items)


def _close(reader):
    """Close a reader's generator now: one abandoned by an error would otherwise hold its source
    open until it is collected, perhaps on another thread."""
    getattr(reader, "close", lambda: None)()


class _Import:
    """One import's state: where it writes, the messages waiting to be written, and its progress.

    Messages of consecutive conversations share insert statements: a statement per conversation
    would cost SQLite a full-text index segment each (10,000 small conversations took 11 s, not 8).
    """

    def __init__(self, store, source, format_name, tenant_id, agent_id, progress, session_id=None, replace=False):
        self.store, self.source, self.format_name = store, source, format_name
        self.tenant_id, self.agent_id = tenant_id, agent_id
        self.progress = progress
        self.session_id, self.replace = session_id, replace  # for whole sessions
        self.read = 0
        self.started_at = utc_now_iso()
        self.pending: list[tuple[int, dict]] = []

    def session(self, source_session):
        """The conversation's new messages, then its overlays, then its title and metadata (which a
        streaming reader may fill in while its messages are read); None for one without messages."""
        if source_session.whole is not None:
            return self._write_whole(source_session)
        ahead = _ReadAhead(_read_source(source_session.messages, self.source))
        try:
            return self._write(_Target(self, source_session, ahead), chain(ahead.read, ahead.rest))
        finally:
            _close(ahead.rest)

    def _write(self, target, messages):
        source_session, result = target.source_session, target.result
        known = target.stored_ids()
        parents = set(target.storage.child_counts()) if target.storage else set()  # branches count the stored tree
        stored_parent = _StoredParents(target.storage, known)
        previous = None
        opening = _Opening(source_session.opening_span)
        for item in messages:
            self._advance()
            opening.add(item)
            result.messages_found += 1
            message_id = item.message.get("id") if isinstance(item.message, dict) else None
            parent_id = previous if item.parent_id is PREVIOUS else item.parent_id
            if isinstance(parent_id, StoredParent):
                parent_id = stored_parent(parent_id.id)
            previous = message_id
            if parent_id is not None:
                parents.add(parent_id)
            if message_id in known:  # imported before: not even checked again
                continue
            target.write(self._new_message(item, parent_id, known))
            result.messages_added += 1
        if not result.messages_found:
            return None
        result.branches = len(known - parents)
        if source_session.overlays:
            self.flush()  # an overlay is checked against the stored tree
            _write_overlays(target.storage, source_session.overlays, self.source, result)
        target.describe(opening.record if source_session.opening_span != 0 else None)
        return result

    def _write_whole(self, source_session):
        """A whole session, as the source holds it, in one write (``WholeSession``)."""
        whole, agent_id = source_session.whole, self.agent_for(source_session)
        session_id = self.session_id or check_identifier(source_session.memorylab_id, "session id")
        messages = []
        for item in _read_source(source_session.messages, self.source):
            self._advance()
            item.message["parent_id"] = item.parent_id
            messages.append(item.message)
        self.flush()
        replaced = self.replace and self.store.sessions.find(self.tenant_id, agent_id, session_id) is not None
        self.store.sessions.write(
            self.tenant_id, agent_id, session_id, created_at=whole.created_at, updated_at=whole.updated_at,
            metadata=source_session.metadata, frozen_prompt=whole.frozen_prompt, messages=messages,
            compactions=[_compaction(overlay) for overlay in source_session.overlays], pins=whole.pins,
            context_blocks=whole.context_blocks, replace=self.replace)
        overlays = len(source_session.overlays)
        return SessionImport(session_id=session_id, agent_id=agent_id, title=source_session.title,
                             messages_found=len(messages), messages_added=len(messages),
                             branches=len({m["id"] for m in messages} - {m["parent_id"] for m in messages}),
                             overlays_found=overlays, overlays_added=overlays, existed=replaced, replaced=replaced)

    def agent_for(self, source_session) -> str:
        """The import's agent, else the one the source files the session under."""
        return self.agent_id or check_identifier(source_session.agent_id, "agent id")

    def _new_message(self, item, parent_id, known):
        message = _checked(item, self.source, self.started_at)
        if parent_id is not None and parent_id not in known:
            raise source_error(self.source, item.where, f"message {message['id']!r} answers {parent_id!r}, which "
                                                        "is not an earlier message of the conversation")
        message["parent_id"] = parent_id
        known.add(message["id"])
        return message

    def add(self, pk, message):
        self.pending.append((pk, message))
        if len(self.pending) == BATCH:
            self.flush()

    def flush(self):
        self.store.sessions.insert_messages(self.pending)
        self.pending = []

    def _advance(self):
        self.read += 1
        if self.progress and self.read % BATCH == 0:
            self.progress(self.read)

    def finish(self):
        self.flush()
        if self.progress and self.read % BATCH:
            self.progress(self.read)


class _StoredParents:
    """The stored message a ``StoredParent`` names: the one of that id, else the one whose metadata
    lists it among its ``source_ids`` (a message the source wrote as several entries), else None.
    Those lists are read once, at the first name that is no stored id."""

    def __init__(self, storage, known):
        self.storage, self.known, self.aliases = storage, known, None

    def __call__(self, source_id):
        if source_id in self.known:
            return source_id
        if self.aliases is None:
            self.aliases = _source_aliases(self.storage) if self.storage else {}
        return self.aliases.get(source_id)


def _source_aliases(storage):
    """{source id: stored message id} for every stored message listing ``source_ids``, read by pages."""
    span, aliases = storage.seq_span(), {}
    for page in storage.messages_between(*span) if span else ():
        for message in page:
            listed = (message.get("metadata") or {}).get("source_ids")
            for source_id in listed if isinstance(listed, list) else ():
                if isinstance(source_id, str):
                    aliases.setdefault(source_id, message["id"])
    return aliases


class _Target:
    """The memorylab session a conversation goes into: one this very conversation was imported into
    before, or else a new one, made only once there is a message to write. A session of the same id
    that another source's conversation went into leaves this one the next of ``id~2``, ``id~3``..."""

    def __init__(self, run, source_session, ahead):
        self.run, self.source_session = run, source_session
        self.origin = {"format": run.format_name, "id": source_session.source_id, "file": str(run.source)}
        self.agent_id = run.agent_for(source_session)
        self.key, self.storage = self._place(check_identifier(source_session.memorylab_id, "session id"), ahead)
        self.result = SessionImport(session_id=self.key[2], agent_id=self.agent_id, title=None,
                                    existed=self.storage is not None)

    def _place(self, session_id, ahead):
        """(key, storage) of the session holding this conversation, or (key, None) of the first free id."""
        catalog = self.run.store.sessions
        for number in count(1):
            key = (self.run.tenant_id, self.agent_id,
                   session_id if number == 1 else check_identifier(f"{session_id}~{number}", "session id"))
            catalog.hold_name(*key)  # an import of the same source at once waits for this one
            pk = catalog.find(*key)
            if pk is None:
                return key, None
            storage = catalog.storage(pk)
            stored = storage.info()["metadata"].get("source")
            if self._holds_this_conversation(stored, ahead):
                return key, storage
            if number == 1 and not self._from_this_source(stored):
                raise ConflictError(
                    f"session {session_id!r} of agent {self.agent_id!r} exists and was not imported from "
                    f"this {self.run.format_name} conversation; import it under another agent (--agent)"
                )

    def _from_this_source(self, stored):
        """Imported from a conversation of this format and id: this one, or another source's namesake."""
        return isinstance(stored, dict) and (stored.get("format"), stored.get("id")) == (
            self.run.format_name, self.source_session.source_id)

    def _holds_this_conversation(self, stored, ahead):
        """Imported from this conversation: same format and id, and it opened as this one opens. A
        session recorded without an opening (by an earlier memorylab) is taken at its word."""
        if not self._from_this_source(stored):
            return False
        opening = stored.get("opening")
        if not isinstance(opening, dict) or self.source_session.opening_span == 0:
            return True
        span = opening.get("messages")
        return is_integer(span) and span >= 0 and _Opening.of(ahead.first(span)) == opening

    def stored_ids(self):
        """The ids the session holds, this import's waiting ones included (a source may repeat a
        conversation)."""
        if self.storage is None:
            return set()
        if any(pk == self.storage.pk for pk, _ in self.run.pending):
            self.run.flush()
        return self.storage.message_ids()

    def write(self, message):
        if self.storage is None:
            catalog = self.run.store.sessions
            self.storage = catalog.storage(catalog.ensure(*self.key, {"source": self.origin}))
        self.run.add(self.storage.pk, message)

    def describe(self, opening):
        """The source's title and facts over the session's metadata, and how the conversation opens
        now; the first import's file stays the recorded source."""
        metadata = self.storage.info()["metadata"]
        source = {**self.origin, **(metadata.get("source") or {})}
        if opening is not None:
            source["opening"] = opening
        described = {**metadata, **self.source_session.metadata, "source": source}
        if self.source_session.title:
            described["title"] = self.source_session.title
        self.result.title = described.get("title")
        if described != metadata:
            self.storage.set_metadata(described)


class _ReadAhead:
    """A conversation's messages, the first few of which may be read before the rest (``read``)."""

    def __init__(self, messages):
        self.read, self.rest = [], iter(messages)

    def first(self, span):
        """The first ``span`` messages, fewer when the conversation has fewer."""
        self.read.extend(islice(self.rest, max(span - len(self.read), 0)))
        return self.read[:span]


class _Opening:
    """The digest of a conversation's first ``span`` messages (all when None) as the source gave them:
    what a copy of the same conversation, or the same one grown, opens with too."""

    def __init__(self, span):
        self.span, self.count, self.digest = span, 0, hashlib.sha256()

    @classmethod
    def of(cls, items):
        opening = cls(None)
        for item in items:
            opening.add(item)
        return opening.record

    def add(self, item):
        if self.span is None or self.count < self.span:
            self.digest.update(json.dumps(item.message, sort_keys=True, default=str).encode() + b"\n")
            self.count += 1

    @property
    def record(self):
        return {"messages": self.count, "digest": self.digest.hexdigest()[:16]}


def _checked(item, source, imported_at):
    """The message as an append would store it; one without a time of its own takes the import's."""
    raw = item.message
    if not isinstance(raw, dict) or raw.get("id") is None:
        raise source_error(source, item.where, "expected a message with an id")
    try:
        created_at = raw.get("created_at")
        message, size_bound = normalized_and_measured(
            {**raw, "created_at": imported_at if created_at is None else _utc(created_at)})
        protected = without_claimed_keys(message, item.reader_keys)
        if protected is not message:  # a renamed key is longer than the bound measured
            message, size_bound = protected, None
        message = enforce_row_size_limit(message, size_bound=size_bound)
    except MemoryLabError as error:
        raise source_error(source, item.where, str(error)) from None
    message["tokens"] = estimate_message_tokens([message])
    return message


def _utc(moment):
    """``to_utc_iso``, remembered for text: the messages of one source share few distinct times."""
    return _utc_text(moment) if isinstance(moment, str) else to_utc_iso(moment)


@lru_cache(maxsize=4096)
def _utc_text(moment):
    return to_utc_iso(moment)


def _compaction(overlay):
    """A whole session's overlay as the store writes it, with the id and time the source gave it."""
    return {"id": overlay.id, "from_id": overlay.from_id, "to_id": overlay.to_id, "summary": overlay.summary,
            "created_at": overlay.created_at, "metadata": overlay.metadata}


def _write_overlays(storage, overlays, source, result):
    stored = {(o["from_id"], o["to_id"], o["summary"]) for o in storage.overlays()} if result.existed else set()
    for overlay in overlays:
        result.overlays_found += 1
        if (overlay.from_id, overlay.to_id, overlay.summary) in stored:
            continue
        try:
            storage.add_overlay(overlay.summary, overlay.from_id, overlay.to_id, overlay.metadata)
        except MemoryLabError as error:
            raise source_error(source, overlay.where, f"a compaction summary does not fit the tree: {error}") from None
        result.overlays_added += 1
