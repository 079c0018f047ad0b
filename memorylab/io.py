"""Whole-session export and import as JSON: the file format, its writer and its checks.

The export holds everything a session is made of (every branch, overlays, pins, context blocks,
metadata) so that export -> import -> export gives the same document. An import is validated in
full before anything is written and then written in one transaction by the import pipeline
(``memorylab.importers``, where an export is one of the source formats): a broken or hostile file
gets an ImportFormatError that says what is wrong, and the store is left as it was.
"""
import json
from pathlib import Path
from typing import Any

from .context.blocks import check_label
from .errors import ImportFormatError, MemoryLabError
from .history.pins import pin_note_problem
from .history.session import Session
from .history.truncation import enforce_row_size_limit
from .messages import normalized_and_measured, to_utc_iso
from .store import capabilities
from .tokens import estimate_message_tokens
from .validation import is_integer

EXPORT_FORMAT = "memorylab.session"
EXPORT_VERSION = 1
MAX_IMPORT_BYTES = 256 * 1024 * 1024
EXPORTED_FIELDS = ("id", "parent_id", "role", "parts", "created_at", "metadata")


def export_session(session) -> dict:
    """The session as a JSON-ready dict (``json.dumps`` it, or use ``write_export``)."""
    return _document(session, [_exported(m) for m in session.get_all_messages()])


def _exported(message):
    return {key: message[key] for key in EXPORTED_FIELDS}


def _document(session, messages):
    info = session.info
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "session": {
            "id": info["session_id"],
            "tenant_id": info["tenant_id"],
            "agent_id": info["agent_id"],
            "created_at": info["created_at"],
            "updated_at": info["updated_at"],
            "metadata": info["metadata"],
            "cached_prompt": session.storage.blocks.frozen_prompt(),  # the frozen prompt: its name in version 1 files
        },
        "messages": messages,
        "compactions": session.get_compactions(),
        "pins": session.get_pins(),
        "context_blocks": session.storage.blocks.all(),
    }


def write_export(session, target, *, page_size=1000) -> None:
    """Write ``export_session(session)`` to ``target`` (a path, or an open text file such as
    ``sys.stdout``) as indented JSON with each message on a line of its own, the messages read and
    written ``page_size`` at a time in the order they were stored: a session of any length is exported
    holding a page of it. The document is one snapshot of the store, whoever writes to it meanwhile."""
    if hasattr(target, "write"):
        _write_document(session, target, page_size)
        return
    with open(target, "w", encoding="utf-8") as file:
        _write_document(session, file, page_size)


def _write_document(session, file, page_size):
    with session.snapshot():
        for number, (key, value) in enumerate(_document(session, []).items()):
            opening = ",\n" if number else "{\n"
            if key != "messages":
                file.write(f"{opening}  {_indented(key, 1)}: {_indented(value, 1)}")
                continue
            file.write(f'{opening}  "messages": [')
            written = 0
            for page in capabilities.message_pages(session.storage, page_size):
                for message in page:
                    file.write(f"{',' if written else ''}\n    {_ONE_LINE(_exported(message))}")
                    written += 1
            file.write("\n  ]" if written else "]")
        file.write("\n}")


def _indented(value, depth):
    """``value`` as ``json.dumps(..., indent=2)`` writes it ``depth`` levels down (JSON strings hold no
    newline of their own, so every newline starts a line of the layout)."""
    return _INDENTED.encode(value).replace("\n", "\n" + "  " * depth)


_INDENTED = json.JSONEncoder(ensure_ascii=False, indent=2)
_ONE_LINE = json.JSONEncoder(ensure_ascii=False).encode
"""A message as one line: JSON's C encoder, which an indented layout cannot use, writes 200,000 of them
in about a second where the indented layout took ten."""


def read_export(path) -> Any:
    """Parse an export file, refusing files over MAX_IMPORT_BYTES before reading them."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_IMPORT_BYTES:
        raise ImportFormatError(
            f"{path} is {size:,} bytes; imports are limited to {MAX_IMPORT_BYTES:,} bytes"
        )
    return parse_export(path.read_bytes())


def parse_export(text) -> Any:
    """Parse export JSON (str or bytes) with a clear error for broken JSON."""
    try:
        return json.loads(text)
    except (ValueError, UnicodeDecodeError) as error:
        raise ImportFormatError(f"not valid JSON: {error}") from None
    except RecursionError:
        raise ImportFormatError("not a session export: its JSON is nested too deeply to read") from None


def import_session(store, data, *, session_id=None, tenant_id="default", agent_id=None, replace=False) -> Session:
    """Write an exported session (parsed: ``read_export``) into ``store`` and return its Session.

    The session goes into the caller's ``tenant_id``, never the tenant the file names (a file does not
    choose whose data it joins); ``session_id`` / ``agent_id`` override the ids in the file (to import
    a copy). An existing session with the same id is a ConflictError unless ``replace=True``. It is
    written by the import pipeline, as ``memorylab import`` writes an export file.
    """
    from .importers.memorylab_export import import_export_data  # the pipeline reads this module's format

    return import_export_data(store, data, session_id=session_id, tenant_id=tenant_id, agent_id=agent_id,
                              replace=replace)


def _is_timestamp(value):
    """Stored session dates are compared by SQLite's date functions, which read ISO-8601 only."""
    try:
        to_utc_iso(value)
    except MemoryLabError:
        return False
    return True


def _require(condition, message):
    if not condition:
        raise ImportFormatError(message)


def validate_export(data) -> dict:
    """Check a parsed export completely; returns the normalized pieces to write."""
    _require(isinstance(data, dict), "an export must be a JSON object")
    _require(data.get("format") == EXPORT_FORMAT, f"'format' must be {EXPORT_FORMAT!r}")
    version = data.get("version")
    _require(is_integer(version), "'version' must be an integer")
    _require(version <= EXPORT_VERSION,
             f"export version {version} was written by a newer memorylab (this one reads {EXPORT_VERSION})")
    header = data.get("session")
    _require(isinstance(header, dict), "'session' must be an object with at least an 'id'")
    metadata = header.get("metadata") or {}
    _require(isinstance(metadata, dict), "session 'metadata' must be an object")
    for field in ("created_at", "updated_at"):
        _require(header.get(field) is None or _is_timestamp(header[field]),
                 f"session {field!r} must be an ISO-8601 timestamp, got {header.get(field)!r:.80}")
    created_at = header.get("created_at")
    frozen_prompt = header.get("cached_prompt")
    _require(frozen_prompt is None or isinstance(frozen_prompt, str), "session 'cached_prompt' must be a string")
    messages = _validate_messages(data.get("messages", []))
    parents = {m["id"]: m["parent_id"] for m in messages}
    fallback_time = messages[0]["created_at"] if messages else "1970-01-01T00:00:00Z"
    return {
        "session_id": header.get("id"),
        "tenant_id": header.get("tenant_id") or "default",
        "agent_id": header.get("agent_id") or "default",
        "created_at": created_at or fallback_time,
        "updated_at": header.get("updated_at") or max((m["created_at"] for m in messages), default=None)
        or created_at or fallback_time,
        "metadata": metadata,
        "frozen_prompt": frozen_prompt,
        "messages": messages,
        "compactions": _validate_compactions(data.get("compactions", []), parents),
        "pins": _validate_pins(data.get("pins", []), parents),
        "context_blocks": _validate_blocks(data.get("context_blocks", [])),
    }


def _validate_messages(raw_messages):
    _require(isinstance(raw_messages, list), "'messages' must be a list")
    messages, seen = [], set()
    for i, raw in enumerate(raw_messages):
        _require(isinstance(raw, dict), f"messages[{i}] must be an object")
        try:
            message, size_bound = normalized_and_measured(raw)
            message = enforce_row_size_limit(message, size_bound=size_bound)
        except MemoryLabError as error:
            raise ImportFormatError(f"messages[{i}]: {error}") from None
        _require(raw.get("id") is not None, f"messages[{i}] has no 'id'")
        _require(message["id"] not in seen, f"messages[{i}]: duplicate id {message['id']!r}")
        parent_id = raw.get("parent_id")
        _require(parent_id is None or parent_id in seen,
                 f"messages[{i}] ({message['id']!r}): parent_id {parent_id!r} is not an earlier message "
                 "(parents must come before their children)")
        seen.add(message["id"])
        message["parent_id"] = parent_id
        message["tokens"] = estimate_message_tokens([message])
        messages.append(message)
    return messages


def _path_ids(parents, leaf_id):
    ids = set()
    while leaf_id is not None and leaf_id not in ids:
        ids.add(leaf_id)
        leaf_id = parents.get(leaf_id)
    return ids


def _validate_compactions(raw_compactions, parents):
    _require(isinstance(raw_compactions, list), "'compactions' must be a list")
    compactions, seen = [], set()
    for i, raw in enumerate(raw_compactions):
        where = f"compactions[{i}]"
        _require(isinstance(raw, dict), f"{where} must be an object")
        overlay_id = raw.get("id", i + 1)
        _require(is_integer(overlay_id) and 0 < overlay_id < 2**63,
                 f"{where}: 'id' must be a positive 64-bit integer")
        _require(overlay_id not in seen, f"{where}: duplicate overlay id {overlay_id}")
        seen.add(overlay_id)
        _require(isinstance(raw.get("summary"), str), f"{where}: 'summary' must be a string")
        _require(raw.get("to_id") in parents, f"{where}: to_id {raw.get('to_id')!r} is not a message")
        _require(raw.get("from_id") in _path_ids(parents, raw["to_id"]),
                 f"{where}: from_id {raw.get('from_id')!r} is not on the path to {raw['to_id']!r}")
        metadata = raw.get("metadata") or {}
        _require(isinstance(metadata, dict), f"{where}: 'metadata' must be an object")
        compactions.append({
            "id": overlay_id, "from_id": raw["from_id"], "to_id": raw["to_id"], "summary": raw["summary"],
            "created_at": raw.get("created_at") or "1970-01-01T00:00:00Z", "metadata": metadata,
        })
    return compactions


def _validate_pins(raw_pins, parents):
    """Pins name messages of the export; an export written before pins existed has none."""
    _require(isinstance(raw_pins, list), "'pins' must be a list")
    pins, seen = [], set()
    for i, raw in enumerate(raw_pins):
        where = f"pins[{i}]"
        _require(isinstance(raw, dict), f"{where} must be an object")
        _require(raw.get("message_id") in parents, f"{where}: message_id {raw.get('message_id')!r} is not a message")
        _require(raw["message_id"] not in seen, f"{where}: {raw['message_id']!r} is pinned twice")
        seen.add(raw["message_id"])
        note = raw.get("note") or ""
        problem = pin_note_problem(note)
        _require(problem is None, f"{where}: {problem}")
        pinned_at = raw.get("pinned_at")
        _require(pinned_at is None or _is_timestamp(pinned_at), f"{where}: 'pinned_at' must be an ISO-8601 timestamp")
        pins.append({"message_id": raw["message_id"], "note": note, "pinned_at": pinned_at or "1970-01-01T00:00:00Z"})
    return pins


def _validate_blocks(raw_blocks):
    _require(isinstance(raw_blocks, list), "'context_blocks' must be a list")
    labels = set()
    for i, block in enumerate(raw_blocks):
        _require(isinstance(block, dict) and isinstance(block.get("label"), str)
                 and isinstance(block.get("content"), str),
                 f"context_blocks[{i}] must be an object with string 'label' and 'content'")
        _require(block["label"] not in labels, f"context_blocks[{i}]: duplicate label {block['label']!r}")
        try:
            check_label(block["label"])
        except MemoryLabError as error:
            raise ImportFormatError(f"context_blocks[{i}]: {error}") from None
        labels.add(block["label"])
    return raw_blocks
