"""SQL for ``memorylab check``: questions whose answer is empty on a healthy database.

``Integrity`` asks the questions every backend shares; ``SQLiteIntegrity`` adds SQLite's own page,
foreign-key and FTS5 checks, and ``PostgresIntegrity`` answers those with nothing found (PostgreSQL
enforces foreign keys and computes its search vectors itself). Each method returns what it found
(rows, counts, the engine's own complaint) and repairs nothing: wording the report is
``memorylab.check``'s job, a repair is ``quarantine``'s. Every question is a read, except FTS5's own
index check, which SQLite runs as a command written into the index (``fts_complaint``).
"""
import enum
import re
from collections.abc import Iterator
from typing import Final, Literal

from ..errors import StoreBusyError, StoreError, StoreReadOnlyError
from . import schema
from .repository import Repository
from .rows import HAS_TOOL_PART, JSON_KINDS, MESSAGE_COLUMNS, document_problems, session_name, unreadable_message

_FTS_CONTENT = re.compile(r"\bcontent\s*=\s*'([^']*)'")
_FTS_CONTENT_ROWID = re.compile(r"\bcontent_rowid\s*=\s*'([^']*)'")
_SESSION = "s.tenant_id, s.agent_id, s.session_id"
_TABLES = {table.name: table for table in schema.TABLES}
_KEYS = {name: table.key for name, table in _TABLES.items()}
_ROW_NAMES = {
    # How reads name a row of each table in their DamagedRowError, so that check names it alike.
    "sessions": session_name,
    "compactions": lambda r: f"overlay {r['id']}",
    "kv_entries": lambda r: f"KV entry {r['key']!r} (namespace {r['namespace']!r}, tenant {r['tenant_id']!r})",
    "memory_records": lambda r: f"long-term record {r['pk']} (workspace {r['workspace']!r})",
    "experiments": lambda r: f"experiment {r['name']!r}",
    "experiment_arms": lambda r: f"experiment {r['experiment']!r}, arm {r['name']!r}",
    "experiment_probes": lambda r: f"experiment {r['experiment']!r}, probe {r['probe_id']!r}",
    "experiment_runs": lambda r: f"experiment run {r['pk']}",
    "quarantine": lambda r: f"quarantined row {r['pk']}",
}


class _Unchecked(enum.Enum):
    """A type of its own for ``NOT_CHECKED``, so that a type checker tells it from a complaint's text."""

    NOT_CHECKED = "not checked"


NOT_CHECKED: Final = _Unchecked.NOT_CHECKED
"""``fts_complaint``'s answer when the store may only read: FTS5 checks an index through a command
written into it, which a read-only database refuses before it starts."""


def _quote(name):
    return '"' + name.replace('"', '""') + '"'


class Integrity(Repository):
    def database_size(self) -> dict:
        """``{"sessions", "messages", "overlays"}``: row counts, for the report's heading."""
        row = self._one(
            "SELECT (SELECT COUNT(*) FROM sessions) AS sessions, (SELECT COUNT(*) FROM messages) AS messages,"
            " (SELECT COUNT(*) FROM compactions) AS overlays"
        )
        return dict(row)

    def messages_with_missing_parent(self) -> list[dict]:
        """Messages whose ``parent_id`` names no message of their session, oldest first."""
        return [dict(r) for r in self._all(
            f"""SELECT {_SESSION}, m.id, m.parent_id FROM messages m JOIN sessions s ON s.pk = m.session_pk
            WHERE m.parent_id IS NOT NULL AND NOT EXISTS
                (SELECT 1 FROM messages p WHERE p.session_pk = m.session_pk AND p.id = m.parent_id)
            ORDER BY m.seq"""
        )]

    _CHILDREN_OF_REACHED = "messages c JOIN reached r ON c.session_pk = r.session_pk AND c.parent_id = r.id"
    """The recursive step of ``messages_off_every_root``: the children of the messages reached so far."""

    def messages_off_every_root(self) -> list[dict]:
        """Messages that no walk down from a root (or from an orphan) reaches: their parent links loop.
        An anti-join, not NOT IN: PostgreSQL runs NOT IN over a subquery larger than its work memory
        row by row, quadratic on a 200,000-message branch."""
        return [dict(r) for r in self._all(
            f"""WITH RECURSIVE reached(seq, session_pk, id) AS (
                SELECT seq, session_pk, id FROM messages m WHERE parent_id IS NULL OR NOT EXISTS
                    (SELECT 1 FROM messages p WHERE p.session_pk = m.session_pk AND p.id = m.parent_id)
                UNION
                SELECT c.seq, c.session_pk, c.id FROM {self._CHILDREN_OF_REACHED}
            )
            SELECT {_SESSION}, m.id, m.parent_id FROM messages m JOIN sessions s ON s.pk = m.session_pk
            WHERE NOT EXISTS (SELECT 1 FROM reached r WHERE r.seq = m.seq) ORDER BY m.seq"""
        )]

    def messages_off_their_stretch(self) -> list[dict]:
        """Messages flagged as continuing (``schema.MESSAGES``) whose parent is not the message of their
        session stored just before them. A message whose parent is missing is the orphans' question."""
        return [dict(r) for r in self._all(
            f"""SELECT {_SESSION}, m.id, m.parent_id FROM (
                SELECT seq, session_pk, id, parent_id, continues,
                    LAG(id) OVER (PARTITION BY session_pk ORDER BY seq) AS previous FROM messages
            ) AS m JOIN sessions s ON s.pk = m.session_pk
            WHERE m.continues <> 0 AND (m.previous IS NULL OR m.parent_id IS NULL OR m.parent_id <> m.previous)
                AND (m.parent_id IS NULL
                     OR EXISTS (SELECT 1 FROM messages p WHERE p.session_pk = m.session_pk AND p.id = m.parent_id))
            ORDER BY m.seq"""
        )]

    def overlays_off_path(self) -> list[dict]:
        """Overlays that can never apply: an end is not a message of the session, or ``from_id`` is
        not ``to_id`` or one of its ancestors. Each row says which with ``from_exists``,
        ``to_exists`` and ``on_path``."""
        return [dict(r) for r in self._all(
            f"""WITH RECURSIVE up(session_pk, overlay_id, from_id, id) AS (
                SELECT session_pk, id, from_id, to_id FROM compactions
                UNION
                SELECT up.session_pk, up.overlay_id, up.from_id, m.parent_id FROM up JOIN messages m
                    ON m.session_pk = up.session_pk AND m.id = up.id
                WHERE up.id != up.from_id AND m.parent_id IS NOT NULL
            )
            SELECT * FROM (
                SELECT {_SESSION}, c.id, c.from_id, c.to_id,
                    EXISTS (SELECT 1 FROM messages m WHERE m.session_pk = c.session_pk AND m.id = c.from_id)
                        AS from_exists,
                    EXISTS (SELECT 1 FROM messages m WHERE m.session_pk = c.session_pk AND m.id = c.to_id)
                        AS to_exists,
                    EXISTS (SELECT 1 FROM up WHERE up.session_pk = c.session_pk AND up.overlay_id = c.id
                        AND up.id = c.from_id) AS on_path
                FROM compactions c JOIN sessions s ON s.pk = c.session_pk
            ) AS checked WHERE NOT (from_exists AND to_exists AND on_path) ORDER BY session_id, id"""
        )]

    def _batches(self, sql, key, batch):
        """The rows of ``sql`` (a SELECT of table ``t`` with ``{after}`` where its WHERE goes, ordered by
        ``key``) in lists of up to ``batch``, each query going on after the last key of the one before,
        so a large table is never loaded at once."""
        last = None
        while True:
            after = "TRUE" if last is None else f"({', '.join('t.' + c for c in key)}) > ({', '.join('?' * len(key))})"
            rows = self._all(f"{sql.format(after=after)} ORDER BY {', '.join('t.' + c for c in key)} LIMIT ?",
                             (*(last or ()), batch))
            yield rows
            if len(rows) < batch:
                return
            last = tuple(rows[-1][c] for c in key)

    def damaged_rows(self, batch=5000) -> list[dict]:
        """``[{"table", "key", "problem", "session"}]``: every row with a JSON document that reads do
        not accept (unreadable, of another kind than the engine writes there, or a message part of a
        shape it never writes), decoded exactly as reads decode it. ``key`` is the row's primary key
        as a dict, ``problem`` says which row and what is wrong, ``session`` names the session the row
        belongs to (None for rows of no session)."""
        found = self._damaged_messages(batch)
        for table in JSON_KINDS:
            if table != "messages":
                found.extend(self._damaged_documents(table, batch))
        return found

    def _damaged_messages(self, batch):
        found = []
        columns = ", ".join("t." + c for c in MESSAGE_COLUMNS.split(", "))
        sql = (f"SELECT t.seq, {_SESSION}, {columns} FROM messages t JOIN sessions s ON s.pk = t.session_pk"
               " WHERE {after}")
        for rows in self._batches(sql, ("seq",), batch):
            for row in rows:
                problem = unreadable_message(tuple(row)[4:])
                if problem:
                    found.append({"table": "messages", "key": {"seq": row["seq"]}, "problem": problem,
                                  "session": session_name(row)})
        return found

    def _damaged_documents(self, table, batch):
        found, columns = [], {column.name for column in _TABLES[table].columns}
        joins, named = "", ""
        if "session_pk" in columns:
            joins, named = " LEFT JOIN sessions s ON s.pk = t.session_pk", f", {_SESSION}"
        if "experiment_pk" in columns:
            joins, named = " LEFT JOIN experiments e ON e.pk = t.experiment_pk", ", e.name AS experiment"
        sql = f"SELECT t.*{named} FROM {table} t{joins} WHERE {{after}}"
        for rows in self._batches(sql, _KEYS[table], batch):
            for row in rows:
                problems = document_problems(table, row)
                if problems:
                    found.append({"table": table, "key": {c: row[c] for c in _KEYS[table]},
                                  "problem": f"{_ROW_NAMES[table](row)}: {'; '.join(problems)}",
                                  "session": session_name(row) if "session_pk" in columns else None})
        return found

    def sessions_with_tool_parts(self, batch=1000) -> Iterator[dict]:
        """``{"pk", "tenant_id", "agent_id", "session_id"}`` of each session holding a message with a
        tool part, the only sessions the tool-pair lint can fault, by key, read ``batch`` at a time."""
        sql = ("SELECT t.pk, t.tenant_id, t.agent_id, t.session_id FROM sessions t WHERE {after} AND EXISTS"
               f" (SELECT 1 FROM messages m WHERE m.session_pk = t.pk AND m.{HAS_TOOL_PART})")
        for rows in self._batches(sql, ("pk",), batch):
            yield from (dict(row) for row in rows)

    def stale_latest_pointers(self) -> list[dict]:
        """Sessions whose ``latest_message_id`` (where appends go by default) is not their newest
        message; ``latest_exists`` says whether it names a message at all."""
        return [dict(r) for r in self._all(
            f"""SELECT * FROM (
                SELECT {_SESSION}, s.latest_message_id,
                    (SELECT id FROM messages WHERE session_pk = s.pk ORDER BY seq DESC LIMIT 1) AS newest_id,
                    EXISTS (SELECT 1 FROM messages WHERE session_pk = s.pk AND id = s.latest_message_id)
                        AS latest_exists
                FROM sessions s
            ) AS checked WHERE latest_message_id IS DISTINCT FROM newest_id ORDER BY session_id"""
        )]


class SQLiteIntegrity(Integrity):
    def integrity_errors(self, limit=100) -> list[str]:
        """What ``PRAGMA integrity_check`` reports (pages, indexes, constraints); [] for a sound file."""
        # One row may hold several lines, under a "*** in database main ***" heading.
        lines = [line for row in self._all(f"PRAGMA integrity_check({int(limit)})") for line in row[0].splitlines()]
        return [line for line in lines if line not in ("ok", "*** in database main ***")]

    def fts_indexes(self) -> list[dict]:
        """``[{"index", "content", "rowid"}]`` for every FTS5 table in the schema, read from the schema
        itself so that an index a later migration adds is checked too. ``content`` is the table an
        external-content index mirrors, None for a contentless or self-contained one."""
        rows = self._all(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%fts5%'"
            " ORDER BY name"
        )
        indexes = []
        for row in rows:
            content = _FTS_CONTENT.search(row["sql"])
            rowid = _FTS_CONTENT_ROWID.search(row["sql"])
            indexes.append({"index": row["name"], "content": (content.group(1) if content else "") or None,
                            "rowid": rowid.group(1) if rowid else "rowid"})
        return indexes

    def fts_complaint(self, index, *, against_content) -> str | Literal[_Unchecked.NOT_CHECKED] | None:
        """FTS5's ``integrity-check`` of ``index``; with ``against_content`` it also compares every
        row with the text of its content table. None when it passes, ``NOT_CHECKED`` on a database this
        store may not write, else SQLite's error text."""
        name = _quote(index)
        try:
            with self.transaction() as conn:
                conn.execute(f"INSERT INTO {name} ({name}, rank) VALUES ('integrity-check', ?)",
                             (1 if against_content else 0,))
        except StoreReadOnlyError:
            return NOT_CHECKED
        except StoreBusyError:
            raise
        except StoreError as error:
            return str(error.__cause__)
        return None

    def fts_row_gaps(self, index, content, rowid) -> tuple[int, int]:
        """(rows of ``content`` missing from ``index``, rows of ``index`` whose content row is gone),
        counted against the index's ``_docsize`` table, which holds one row per indexed row."""
        docsize, content, rowid = _quote(index + "_docsize"), _quote(content), _quote(rowid)
        row = self._one(
            f"SELECT (SELECT COUNT(*) FROM {content} WHERE {rowid} NOT IN (SELECT id FROM {docsize})) AS missing,"
            f" (SELECT COUNT(*) FROM {docsize} WHERE id NOT IN (SELECT {rowid} FROM {content})) AS stale"
        )
        return row["missing"], row["stale"]

    def rows_of_missing_parents(self) -> dict[tuple[str, str], int]:
        """``{(table, parent table): rows}`` whose foreign key names a row that does not exist: messages,
        overlays, blocks... of a deleted session (``PRAGMA foreign_key_check``)."""
        counts: dict[tuple[str, str], int] = {}
        for row in self._all("PRAGMA foreign_key_check"):
            key = (row["table"], row["parent"])
            counts[key] = counts.get(key, 0) + 1
        return counts


class PostgresIntegrity(Integrity):
    # PostgreSQL plans a recursive step once, for a working table it guesses large, and joins it by
    # hashing every message: a 200,000-message branch, walked one message a step, hashed the table
    # 200,000 times (over 12 minutes). A lateral subquery it cannot flatten (OFFSET 0) looks each
    # step's children up in the (session, parent) index instead: under a second.
    _CHILDREN_OF_REACHED = ("reached r CROSS JOIN LATERAL (SELECT seq, session_pk, id FROM messages c"
                            " WHERE c.session_pk = r.session_pk AND c.parent_id = r.id OFFSET 0) AS c")

    def integrity_errors(self, limit=100) -> list[str]:
        """PostgreSQL checks its pages and indexes itself (and ``amcheck`` needs a superuser): none to report."""
        return []

    def fts_indexes(self) -> list[dict]:
        """The search vectors are generated columns, recomputed with their row: no index to drift."""
        return []

    def rows_of_missing_parents(self) -> dict[tuple[str, str], int]:
        """Foreign keys are always enforced on PostgreSQL: no row can outlive its session."""
        return {}
