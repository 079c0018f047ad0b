"""Values written as rows and rows read back as values; a row that cannot be read is a
DamagedRowError naming it."""
import json

from ..errors import DamagedRowError

MESSAGE_COLUMNS = "id, parent_id, role, parts, created_at, metadata, tokens"

# One encoder for every write: json.dumps with options builds a new JSONEncoder on each call,
# and an append encodes twice (parts and metadata).
dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

# Stored JSON is always written compactly by dumps, so the decoder's outer layers (whitespace
# handling) can be skipped; reading a 10k-message path spends most of its time here. ``scan_once`` is
# the C scanner that ``raw_decode`` wraps in a Python frame of its own (a fifth of decoding a path);
# it reads one value from an offset, as ``raw_decode`` does, and raises StopIteration where that
# raises ValueError.
_decoder = json.JSONDecoder()
_scan = _decoder.scan_once
_decode = _decoder.raw_decode


def message_from_row(row):
    """A message dict from a row of ``MESSAGE_COLUMNS`` (unpacked by position: a name lookup on
    sqlite3.Row scans the column names, which made up a quarter of reading a 10k-message path)."""
    message_id, parent_id, role, stored_parts, created_at, stored_metadata, tokens = row
    try:
        parts = _scan(stored_parts, 0)[0]
        metadata = {} if stored_metadata == "{}" else _scan(stored_metadata, 0)[0]
    except (StopIteration, ValueError, TypeError):
        raise DamagedRowError(_problem(message_id, stored_parts, stored_metadata)) from None
    if type(parts) is not list or type(metadata) is not dict:
        raise DamagedRowError(_problem(message_id, stored_parts, stored_metadata))
    return {
        "id": message_id,
        "role": role,
        "parts": parts,
        "created_at": created_at,
        "metadata": metadata,
        "parent_id": parent_id,
        "tokens": tokens,
    }


def _problem(message_id, parts, metadata):
    """What is wrong with a message row's stored JSON (the slow path, taken only for a damaged row)."""
    for field, text, kind in (("parts", parts, list), ("metadata", metadata, dict)):
        try:
            value = _decode(text)[0]
        except (ValueError, TypeError) as error:
            return f"message {message_id!r}: its stored {field} is not readable JSON ({error})"
        if type(value) is not kind:
            return f"message {message_id!r}: its stored {field} is a JSON {type(value).__name__}, not a {kind.__name__}"
    return f"message {message_id!r} cannot be read"


def unreadable_message(row):
    """Why a row of ``MESSAGE_COLUMNS`` cannot be read as a message, or None when it can."""
    try:
        message_from_row(row)
    except DamagedRowError as error:
        return str(error)
    return None


def like_literal(text):
    """``text`` as a LIKE pattern that matches only itself (with ``ESCAPE '\\'``)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
