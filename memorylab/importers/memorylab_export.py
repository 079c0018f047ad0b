"""memorylab's own session export (``memorylab export``), among the formats ``import`` detects.

An export is a whole session (context blocks and the frozen prompt included), so it is written by
``memorylab.io.import_session``, all or nothing, rather than merged message by message.
"""
from __future__ import annotations

import re
from contextlib import nullcontext

from ..errors import ImportFormatError
from ..io import EXPORT_FORMAT, import_session, read_export, validate_export
from .formats import SourceFormat, SourceProbe
from .writer import ImportReport, SessionImport, rolled_back


_OPENING = re.compile(rb'\s*\{\s*"format"\s*:\s*"' + re.escape(EXPORT_FORMAT.encode()) + b'"')


def _detect(probe: SourceProbe) -> bool:
    """An export opens with its format (``export_session`` writes it first); a file that merely
    mentions the format somewhere, such as a transcript quoting one, is not an export."""
    if isinstance(probe.whole_json, dict):
        return probe.whole_json.get("format") == EXPORT_FORMAT
    return _OPENING.match(probe.head) is not None  # the bytes: an export too large to read is still one


def _read(path):
    raise TypeError("a memorylab export is imported whole: use import_export")


FORMAT = SourceFormat(name="memorylab", label="memorylab session export (JSON)", agent_id="default",
                      detect=_detect, read=_read)


def import_export(store, path, *, agent_id=None, tenant_id="default", session_id=None, replace=False,
                  dry_run=False, name=None) -> ImportReport:
    """Import an export file into ``tenant_id``; a session with its id is a ConflictError unless
    ``replace``, in a dry run too. ``name`` is how the report calls the file (default: its path)."""
    try:
        data = read_export(path)
        plan = validate_export(data)
    except ImportFormatError as error:
        place = str(name or path)
        raise error if str(error).startswith(place) else ImportFormatError(f"{place}: {error}") from None
    report = ImportReport(source=str(name or path), format=FORMAT.name, dry_run=dry_run)
    found = len(plan["messages"])
    result = SessionImport(
        session_id=session_id or plan["session_id"], agent_id=agent_id or plan["agent_id"],
        title=plan["metadata"].get("title"), messages_found=found, overlays_found=len(plan["compactions"]),
        branches=len({m["id"] for m in plan["messages"]} - {m["parent_id"] for m in plan["messages"]}),
    )
    with rolled_back(store) if dry_run else nullcontext():
        import_session(store, data, session_id=session_id, tenant_id=tenant_id, agent_id=agent_id, replace=replace)
    result.messages_added, result.overlays_added = found, result.overlays_found
    report.sessions.append(result)
    return report
