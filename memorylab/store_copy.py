"""Copying a whole store to another backend, verified: ``memorylab copy --from lab.db --to postgresql://...``.

Every table is copied row by row with every column as stored, keys included, so message order,
overlay ids, the agent registry, KV expiry and long-term record ids survive. The source is read in
one snapshot; the target is written in one transaction and only when it is empty. Before that
transaction commits, the copy is checked inside it: row counts per table, a digest of every table's
rows, a SHA-256 of every session's export on both sides, and one search on the target. A copy that
fails or does not match is rolled back, so the target ends up either verified or as it was.
"""
import hashlib
import json
import string
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from .errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    StoreCopyError,
)
from .history.session import Session
from .io import export_session
from .store import ALL_TENANTS, Store, is_postgres_url, require_database
from .store.bulk import TABLES, table_columns
from .store.sqlite import writes_over

BATCH = 1000
"""Rows per read, and per write of a table's rows."""

EXAMPLES = 5
"""How many differing sessions a failed verification names."""

NOUNS = {
    # Summary order, with (singular, plural).
    "sessions": ("session", "sessions"),
    "messages": ("message", "messages"),
    "compactions": ("overlay", "overlays"),
    "message_pins": ("pin", "pins"),
    "context_blocks": ("context block", "context blocks"),
    "skill_activations": ("skill activation", "skill activations"),
    "agents": ("agent", "agents"),
    "search_entries": ("search entry", "search entries"),
    "kv_entries": ("KV entry", "KV entries"),
    "memory_records": ("long-term record", "long-term records"),
    # Copied like every table (the only copy of what a repair set aside) and named, so a summary says so.
    "quarantine": ("quarantined row", "quarantined rows"),
}


def _count(n, table):
    singular, plural = NOUNS[table]
    return f"{n:,} {singular if n == 1 else plural}"


def _counts(counts, always=()):
    return ", ".join(_count(counts[t], t) for t in NOUNS if counts[t] or t in always)


@dataclass(frozen=True)
class StoreCopyReport:
    """What ``copy_store`` copied and checked; ``str(report)`` is the summary ``memorylab copy`` prints."""

    source: str
    target: str
    counts: dict
    """``{table: (rows in the source, rows in the target)}``."""
    sessions_verified: int
    """Sessions whose exports were compared."""
    sessions_matching: int
    search_word: str | None
    """The word a search on the target found its message by (None when no message had a plain word)."""
    mismatches: list
    """What differs between the two sides, worded; empty when the copy verified."""

    @property
    def ok(self):
        return not self.mismatches

    def __str__(self):
        copied = _counts({t: n for t, (n, _) in self.counts.items()}, always=("sessions", "messages"))
        summary = f"copied {copied} from {self.source} to {self.target}"
        if self.mismatches:
            return f"{summary}; verification FAILED: " + "; ".join(self.mismatches)
        search = f", search finds {self.search_word!r}" if self.search_word else ""
        return (f"{summary}; verified: counts match, every row matches, "
                f"{self.sessions_matching}/{self.sessions_verified} session checksums match{search}")


def copy_store(source, target, *, progress=None, batch=BATCH):
    """Copy every row of ``source`` into the empty ``target`` and verify it; returns a StoreCopyReport.

    Each side is a ``Store`` or what opens one: a file path (the source file must exist) or a
    ``postgresql://`` URL. ``progress(step, done, total)`` is called after each batch of a table
    (``step`` is the table) and each verified session (``"session checksums"``). A target holding
    rows is a ConflictError, a copy that does not verify a StoreCopyError; either way, and on any
    other error, nothing is written to the target.
    """
    _refuse_writing_over(source, target)
    new_file = _new_sqlite_file(target)
    try:
        with ExitStack() as stack:
            source = _open(stack, source, must_exist=True)
            target = _open(stack, target)
            progress = progress or _silent
            with source.snapshot(), target.transaction():
                _refuse_rows(target)
                totals = source.bulk.counts()
                digests, probe = _copy_rows(source, target, totals, progress, batch)
                report = _verify(source, target, totals, digests, probe, progress)
                if not report.ok:
                    raise StoreCopyError(report)
            return report
    except BaseException:
        if new_file:  # a file this copy created holds nothing worth keeping
            for leftover in (new_file, *(new_file.with_name(new_file.name + end) for end in ("-wal", "-shm"))):
                leftover.unlink(missing_ok=True)
        raise


def _sqlite_file(side):
    """The SQLite file a side of the copy is or names; None for a server or memory."""
    name = side.path if isinstance(side, Store) else str(side)
    return None if is_postgres_url(name) or name in (":memory:", "") else name


def _refuse_writing_over(source, target):
    """Refuse, before either is opened, a target that is the source's file or one SQLite keeps beside it."""
    source_file, target_file = _sqlite_file(source), _sqlite_file(target)
    if source_file and target_file and writes_over(source_file, target_file):
        raise InvalidInputError(f"{target_file} is the source store {source_file} (or a file SQLite keeps beside "
                                "it): copying into it would destroy the source; nothing was done, name a new file")


def _new_sqlite_file(target):
    """The path of a SQLite target that does not exist yet (the copy creates it), else None."""
    if isinstance(target, Store) or is_postgres_url(target) or str(target) == ":memory:":
        return None
    path = Path(target).expanduser()
    return None if path.exists() else path


def _silent(step, done, total):
    pass


def _open(stack, store, *, must_exist=False):
    if isinstance(store, Store):
        return store
    if must_exist:
        require_database(store)
    return stack.enter_context(Store(store))


def _refuse_rows(target):
    held = target.bulk.counts()
    if any(held.values()):
        raise ConflictError(f"{target.path} already holds {_counts(held)}; copy into an empty store "
                            "(a new file, or a new PostgreSQL database or schema)")


def _rows_digest(rows):
    """A digest of rows that ignores their order: text keys sort by each engine's own collation."""
    return sum(int.from_bytes(hashlib.sha256(json.dumps(row).encode()).digest(), "big") for row in rows)


def _copy_rows(source, target, totals, progress, batch):
    """Copy table by table; returns ({table: digest of the rows written}, the search probe)."""
    digests, probe = {}, None
    for table, (key, _) in TABLES.items():
        digest = copied = 0
        for rows in source.bulk.rows(table, batch):
            try:
                written = target.bulk.insert(table, rows)
            except InvalidInputError as error:
                raise InvalidInputError(f"cannot copy {table} into {target.path}: {error}") from None
            digest += _rows_digest(written)
            copied += len(rows)
            progress(table, copied, totals[table])
            if table == "messages":
                probe = _search_probe(written) or probe
        if not copied:
            progress(table, 0, 0)
        if len(key) == 1:
            target.bulk.advance_identity(table, key[0])
        digests[table] = digest
    return digests, probe


def _search_probe(messages):
    """(session key, message id, word) for the newest of ``messages`` with a plain word of four
    letters or more, which both engines tokenize alike; None when none has one."""
    columns = table_columns("messages")
    session_at, id_at, text_at = (columns.index(c) for c in ("session_pk", "id", "text"))
    for row in reversed(messages):
        words = [w.strip(string.punctuation) for w in row[text_at][:10_000].split()]
        words = [w for w in words if len(w) >= 4 and w.isascii() and w.isalpha()]
        if words:
            return row[session_at], row[id_at], max(words, key=len)
    return None


def _checksum(export):
    # Blocks are listed in label order, which follows each engine's collation: compare them sorted.
    canonical = dict(export, context_blocks=sorted(export["context_blocks"], key=lambda b: b["label"]))
    return hashlib.sha256(json.dumps(canonical, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _session_checksum(store, info):
    session = Session.open(store, info["session_id"], tenant_id=info["tenant_id"], agent_id=info["agent_id"])
    return _checksum(export_session(session))


def _verify(source, target, totals, digests, probe, progress):
    mismatches = []
    target_totals = target.bulk.counts()
    for table in TABLES:
        if target_totals[table] != totals[table]:
            mismatches.append(f"{table}: {totals[table]:,} rows in the source, {target_totals[table]:,} in the target")
        elif sum(_rows_digest(rows) for rows in target.bulk.rows(table)) != digests[table]:
            mismatches.append(f"{table}: the target's rows differ from the rows copied")

    sessions = source.sessions.list()
    differing = []
    for done, info in enumerate(sessions, 1):
        try:
            matches = _session_checksum(target, info) == _session_checksum(source, info)
        except NotFoundError:
            matches = False
        if not matches:
            differing.append(info)
        progress("session checksums", done, len(sessions))
    if differing:
        named = "; ".join(f"{i['session_id']!r} (agent {i['agent_id']!r}, tenant {i['tenant_id']!r})"
                          for i in differing[:EXAMPLES])
        more = f" and {len(differing) - EXAMPLES} more" if len(differing) > EXAMPLES else ""
        mismatches.append(f"{len(differing)} of {len(sessions)} session exports differ: {named}{more}")

    if probe:
        session_pk, message_id, word = probe
        # The probe's session key picks one session of whichever tenant holds it.
        hits = target.search(word, tenant_id=ALL_TENANTS, session_pk=session_pk,
                             limit=max(1, target.sessions.storage(session_pk).count()))
        if message_id not in {hit["id"] for hit in hits}:
            mismatches.append(f"searching the target for {word!r} does not find message {message_id!r}")

    return StoreCopyReport(
        source=source.path, target=target.path,
        counts={t: (totals[t], target_totals[t]) for t in TABLES},
        sessions_verified=len(sessions), sessions_matching=len(sessions) - len(differing),
        search_word=probe[2] if probe else None, mismatches=mismatches,
    )
