"""Values written as rows and rows read back as values; a row that cannot be read is a
DamagedRowError naming it.

A stored JSON document is readable when it is one JSON value of the kind the engine writes in its
column (``JSON_KINDS``), and a message's parts are each of a shape the engine writes
(``messages.part_problem``). Reads and ``memorylab check`` decide this with the same functions, so
what check lists is exactly what reads skip.
"""
import json
import warnings
from typing import cast

from ..errors import DamagedRowError, DamagedRowWarning
from ..messages import parts_problem
from ..shapes import Message

MESSAGE_COLUMNS = "id, parent_id, role, parts, created_at, metadata, tokens"
HAS_TOOL_PART = "parts LIKE '%\"toolCallId\"%'"
"""SQL: whether a message's stored parts hold a tool part (each one the engine writes names its call)."""

# One encoder for every write: json.dumps with options builds a new JSONEncoder on each call,
# and an append encodes twice (parts and metadata).
dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def acyclic_dumps(*, allow_nan=True):
    """``dumps`` (``allow_nan`` as in ``json.dumps``) for values already known to hold no cycle, its C
    encoder built once: ``JSONEncoder.encode`` builds one on every call, for a fresh cycle check, which
    was half the cost of encoding a message's parts. A value that holds itself is a RecursionError."""
    encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False, allow_nan=allow_nan)
    # c_make_encoder is CPython's C encoder (None without the accelerator), private and so not in typeshed.
    make_encoder = json.encoder.c_make_encoder  # type: ignore[attr-defined]
    if make_encoder is None:
        return encoder.encode
    encode = make_encoder(None, encoder.default, json.encoder.encode_basestring, None,
                          encoder.key_separator, encoder.item_separator, False, False, allow_nan)
    return lambda value: "".join(encode(value, 0))


dumps_checked = acyclic_dumps()
"""``dumps`` of a normalized message's parts and metadata: normalizing encoded them once, refusing cycles."""

# Stored JSON is always written compactly by dumps, so the decoder's outer layers (whitespace
# handling) can be skipped; reading a 10k-message path spends most of its time here. ``scan_once`` is
# the C scanner that ``raw_decode`` wraps in a Python frame of its own (a fifth of decoding a path);
# it reads one value from an offset, as ``raw_decode`` does, and raises StopIteration where that
# raises ValueError.
_decoder = json.JSONDecoder()
_scan = _decoder.scan_once  # type: ignore[attr-defined]  # set by JSONDecoder.__init__, not in typeshed
_decode = _decoder.raw_decode
UNREADABLE = (StopIteration, ValueError, TypeError, RecursionError)
"""What ``_scan`` raises on a stored document it cannot read (RecursionError: nested deeper than it recurses)."""


JSON_KINDS: dict[str, dict[str, type]] = {
    "sessions": {"metadata": dict},
    "messages": {"parts": list, "metadata": dict},
    "compactions": {"metadata": dict},
    "kv_entries": {"value": object},
    "memory_records": {"body": dict, "tags": list, "provenance": dict, "vector_index": dict},
    "experiments": {"settings": dict},
    "experiment_arms": {"settings": dict},
    "experiment_probes": {"facts": list},
    "experiment_runs": {"arm_settings": dict, "context": list, "request": dict, "scores": list, "usage": dict},
    "quarantine": {"row_key": dict, "row": dict},
}
"""The kind of JSON value the engine writes in every JSON column of ``schema`` (``object``: any)."""

_KIND_NAMES = {dict: "dict", list: "list"}


def json_problem(text, kind) -> str | None:
    """Why ``text`` is not one JSON value of ``kind`` (None when it is); the slow path, taken only
    for a value a read refused."""
    try:
        value, end = _decode(text)
    except (ValueError, TypeError) as error:
        return f"is not readable JSON ({error})"
    except RecursionError:
        return "is not readable JSON (nested too deeply to read)"
    if end != len(text):
        return f"is not readable JSON (text after the value at character {end})"
    if kind is not object and type(value) is not kind:
        return f"is a JSON {type(value).__name__}, not a {_KIND_NAMES[kind]}"
    return None


def read_json(text, kind, where, column):
    """The value of a stored JSON document of ``kind`` (None stays None), or a DamagedRowError that
    names the row (``where``) and its ``column`` and says what is wrong."""
    if text is None:
        return None
    try:
        value, end = _scan(text, 0)
    except UNREADABLE:
        value, end = None, -1
    if end == len(text) and (kind is object or type(value) is kind):
        return value
    raise DamagedRowError(f"{where}: its stored {column} {json_problem(text, kind)}")


def readable(rows, read, where=""):
    """``read(row)`` of every row, leaving out with a DamagedRowWarning each row ``read`` refuses with
    a DamagedRowError, so that one damaged row does not hide the others. ``where`` prefixes the
    warning (the session, for its messages)."""
    values = []
    for row in rows:
        try:
            values.append(read(row))
        except DamagedRowError as error:
            warnings.warn(f"{where}skipped {error}; `memorylab check` lists such rows and `memorylab check "
                          "--repair` sets them aside", DamagedRowWarning, stacklevel=4)
    return values


def placed(message, parent_id) -> Message:
    """A normalized message (with its ``tokens``) as stored under ``parent_id``. Normalizing filled in
    every other key of a ``Message``, which a type checker cannot follow."""
    return cast(Message, dict(message, parent_id=parent_id))


def message_from_row(row):
    """A message dict from a row of ``MESSAGE_COLUMNS``; DamagedRowError when it cannot be read."""
    return messages_from_rows((row,))[0]


def messages_from_rows(rows) -> list:
    """``message_from_row`` of each row, in one loop, unpacked by position (a name lookup on sqlite3.Row
    scans the column names); DamagedRowError at the first row that cannot be read. A branch read
    decodes thousands of rows, most of them one text part and no metadata: those are checked inline
    (a call per row was a tenth of the decoding), every other row by ``_checked_metadata``."""
    messages = []
    for message_id, parent_id, role, stored_parts, created_at, stored_metadata, tokens in rows:
        try:
            parts, parts_end = _scan(stored_parts, 0)
        except UNREADABLE:
            parts, parts_end = None, -1
        if type(parts) is not list or parts_end != len(stored_parts):
            raise DamagedRowError(_problem(message_id, stored_parts, stored_metadata))
        if stored_metadata == "{}" and len(parts) == 1 and type(part := parts[0]) is dict \
                and part.get("type") == "text" and type(part.get("text")) is str:
            metadata = {}
        else:
            metadata = _checked_metadata(message_id, parts, stored_parts, stored_metadata)
        messages.append({
            "id": message_id,
            "role": role,
            "parts": parts,
            "created_at": created_at,
            "metadata": metadata,
            "parent_id": parent_id,
            "tokens": tokens,
        })
    return messages


def _checked_metadata(message_id, parts, stored_parts, stored_metadata):
    """The metadata of a message row whose parts decoded to the list ``parts``, once both are checked:
    DamagedRowError naming the message when its metadata is unreadable or a part of no known shape."""
    if stored_metadata is None:
        raise DamagedRowError(_problem(message_id, stored_parts, stored_metadata))
    metadata = read_json(stored_metadata, dict, f"message {message_id!r}", "metadata")
    shape = parts_problem(parts)
    if shape:
        raise DamagedRowError(f"message {message_id!r}: its stored parts hold a part the engine never writes: {shape}")
    return metadata


def _problem(message_id, parts, metadata):
    """What is wrong with a message row's stored JSON (the slow path, taken only for a damaged row)."""
    for field, text, kind in (("parts", parts, list), ("metadata", metadata, dict)):
        problem = json_problem(text, kind)
        if problem:
            return f"message {message_id!r}: its stored {field} {problem}"
    return f"message {message_id!r} cannot be read"


def unreadable_message(row):
    """Why a row of ``MESSAGE_COLUMNS`` cannot be read as a message, or None when it can."""
    try:
        message_from_row(row)
    except DamagedRowError as error:
        return str(error)
    return None


def document_problems(table, row) -> list[str]:
    """What is wrong with each stored JSON document of a row of ``table`` (its columns by name)."""
    return [f"its stored {column} {problem}" for column, kind in JSON_KINDS[table].items()
            if row[column] is not None and (problem := json_problem(row[column], kind))]


def row_problem(table, row) -> str | None:
    """Why reads refuse a stored row of ``table`` (its columns by name), or None when they read it."""
    if table == "messages":
        return unreadable_message(tuple(row[column] for column in MESSAGE_COLUMNS.split(", ")))
    return "; ".join(document_problems(table, row)) or None


def session_name(row):
    """``session 's1'``, with its agent and tenant where they are not the default: how reads and
    ``memorylab check`` name a session (``row`` has its ``tenant_id``, ``agent_id``, ``session_id``)."""
    where = [f"agent {row['agent_id']!r}"] if row["agent_id"] != "default" else []
    where += [f"tenant {row['tenant_id']!r}"] if row["tenant_id"] != "default" else []
    return f"session {row['session_id']!r}" + (f" ({', '.join(where)})" if where else "")


def like_literal(text):
    """``text`` as a LIKE pattern that matches only itself (with ``ESCAPE '\\'``)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
