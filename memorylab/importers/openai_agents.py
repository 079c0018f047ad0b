"""OpenAI Agents SDK ``SQLiteSession`` databases: each SDK session becomes a memorylab session.

The SDK keeps one Responses input item per row of its messages table (``agent_messages`` unless the
agent named another: ``id, session_id, message_data`` as JSON, ``created_at`` in UTC), read back in
row order; the sessions table it points to (``agent_sessions``) says when each session began. Tables
are found by their columns, not their names. Message ids come from row ids, so a database that grew
gains only its new rows, and an item the SDK popped and replaced stays behind as a branch. Another
database's session of the same name is told apart by its first item (its row, time and content).
"""
from __future__ import annotations

import sqlite3
from collections import defaultdict
from contextlib import closing, contextmanager
from datetime import datetime, timezone
from functools import lru_cache

from ..errors import ImportFormatError, MemoryLabError
from ..validation import check_identifier
from .formats import SourceFormat, SourceProbe, open_readonly
from .openai_items import ITEM_KEY, to_message
from .source import SourceMessage, SourceSession, loads, malformed_at, source_error

ITEM_COLUMNS = {"id", "session_id", "message_data", "created_at"}



def _quoted(name):
    return '"' + name.replace('"', '""') + '"'


def _item_tables(conn) -> list[str]:
    """The tables shaped like the SDK's messages table, by name."""
    columns = defaultdict(set)
    for table, column in conn.execute(
            "SELECT m.name, c.name FROM sqlite_master m, pragma_table_info(m.name) c WHERE m.type = 'table'"):
        columns[table].add(column)
    return sorted(table for table, names in columns.items() if ITEM_COLUMNS <= names)


@contextmanager
def _reading(path):
    """A read-only connection; SQLite's complaints (not a database, a damaged page) name the file."""
    with _reading_errors(path), closing(open_readonly(path)) as conn:
        yield conn


@contextmanager
def _reading_errors(path):
    try:
        yield
    except sqlite3.Error as error:
        raise source_error(path, "", f"cannot read it as an Agents SDK session database ({error})") from None


def _detect(probe: SourceProbe) -> bool:
    if not probe.tables:
        return False
    try:
        with _reading(probe.path) as conn:
            return bool(_item_tables(conn))
    except ImportFormatError:
        return False


def _read(path):
    with _reading(path) as conn:
        for table in _item_tables(conn):
            yield from _sessions(path, conn, table)


def _sessions(path, conn, table):
    started = _sessions_table(conn, table)
    joined = f"LEFT JOIN {_quoted(started)} s ON s.session_id = m.session_id" if started else ""
    rows = conn.execute(
        f"SELECT m.session_id, MIN(m.id), {'MIN(s.created_at)' if started else 'NULL'}"
        f" FROM {_quoted(table)} m {joined} GROUP BY m.session_id ORDER BY MIN(m.id)"
    ).fetchall()
    for session_id, first_row, created_at in rows:
        where = f"{table} row {first_row}"
        try:
            check_identifier(session_id, "session id")
        except MemoryLabError as error:
            raise source_error(path, where, f"expected a session id memorylab can keep: {error}") from None
        metadata = {"created_at": _utc(path, f"{started} session {session_id!r}", created_at)} if created_at else {}
        yield SourceSession(source_id=session_id, metadata=metadata, opening_span=1,
                            messages=_messages(path, conn, table, session_id))


def _sessions_table(conn, table) -> str | None:
    """The table the messages table's ``session_id`` refers to (the SDK declares it)."""
    for row in conn.execute(f"PRAGMA foreign_key_list({_quoted(table)})"):
        if row[3] == "session_id":
            return row[2]
    return None


def _messages(path, conn, table, session_id):
    """One session's items, streamed (the writer reads them all before it asks for the next session)."""
    call_names = {}
    with _reading_errors(path):
        rows = conn.execute(f"SELECT id, message_data, created_at FROM {_quoted(table)} WHERE session_id = ?"
                            " ORDER BY id", (session_id,))
        for row_id, data, created_at in rows:
            where = f"{table} row {row_id}"
            with malformed_at(path, where, "message_data to hold a Responses input item"):
                message = to_message(_item(path, where, data), call_names, text=data)
            message["id"] = f"{table}-{row_id}"
            message["metadata"]["source_id"] = message["id"]
            if created_at is not None:
                message["created_at"] = _utc(path, where, created_at)
            yield SourceMessage(message, where=where, reader_keys=(ITEM_KEY,))


def _item(path, where, data):
    if not isinstance(data, str):
        raise source_error(path, where, f"expected message_data to hold an item as JSON text, got {data!r:.80}")
    try:
        item = loads(data)
    except ValueError as error:
        raise source_error(path, where, f"expected message_data to hold an item as JSON ({error})") from None
    if not isinstance(item, dict) or not (item.get("type") or item.get("role")):
        raise source_error(path, where, "expected message_data to hold a Responses input item, a JSON object "
                                        f"with a 'type' or a 'role', got {data[:80]!r}")
    return item


def _utc(path, where, value):
    try:
        return _utc_text(value)
    except (TypeError, ValueError):
        raise source_error(path, where, f"expected created_at as a timestamp, got {value!r}") from None


@lru_cache(maxsize=1024)
def _utc_text(value):
    """SQLite's CURRENT_TIMESTAMP ("2025-01-31 12:00:00") is UTC without saying so. Cached: the items
    of one run share their second."""
    moment = datetime.fromisoformat(value)
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).isoformat()


FORMAT = SourceFormat(
    name="openai-agents", label="OpenAI Agents SDK sessions (a SQLiteSession database)",
    agent_id="openai-agents", detect=_detect, read=_read,
)
