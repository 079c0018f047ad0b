"""memorylab's own session export (``memorylab export``), a source format like the others.

An export holds one whole session (every branch, overlays with their ids, pins, context blocks, the
frozen prompt, its dates), so its reader yields a ``SourceSession`` marked ``whole``: the writer
puts it in the store as it is, under its own id, all or nothing, instead of merging it message by
message. ``memorylab.io`` defines the file (``validate_export`` checks one completely); this module
turns it into what the import pipeline writes.
"""
from __future__ import annotations

import re

from ..errors import ImportFormatError, MemoryLabError
from ..history.session import Session
from ..io import EXPORT_FORMAT, read_export, validate_export
from ..validation import check_identifier
from .formats import SourceFormat, SourceProbe
from .source import SourceMessage, SourceOverlay, SourceSession, WholeSession
from .writer import write_sessions

_OPENING = re.compile(rb'\s*\{\s*"format"\s*:\s*"' + re.escape(EXPORT_FORMAT.encode()) + b'"')


def _detect(probe: SourceProbe) -> bool:
    """An export opens with its format (``export_session`` writes it first); a file that merely
    mentions the format somewhere, such as a transcript quoting one, is not an export."""
    if isinstance(probe.whole_json, dict):
        return probe.whole_json.get("format") == EXPORT_FORMAT
    return _OPENING.match(probe.head) is not None  # the bytes: an export too large to read is still one


def _read(path):
    """The export's session; what is wrong with the file is refused naming it, before anything is written."""
    try:
        session = whole_session(read_export(path))
    except ImportFormatError as error:
        raise error if str(error).startswith(str(path)) else ImportFormatError(f"{path}: {error}") from None
    yield session


FORMAT = SourceFormat(name="memorylab", label="memorylab session export (JSON)", agent_id=None,
                      detect=_detect, read=_read, whole_sessions=True)


def whole_session(data) -> SourceSession:
    """A parsed export, checked completely (ImportFormatError, saying what is wrong), as the writer takes it."""
    plan = validate_export(data)
    try:
        session_id = check_identifier(plan["session_id"], "session id")
        agent_id = check_identifier(plan["agent_id"], "agent id")
    except MemoryLabError as error:
        raise ImportFormatError(str(error)) from None
    return SourceSession(
        source_id=session_id, agent_id=agent_id, title=plan["metadata"].get("title"), metadata=plan["metadata"],
        messages=[SourceMessage(m, m["parent_id"], f"messages[{i}]") for i, m in enumerate(plan["messages"])],
        overlays=[SourceOverlay(c["from_id"], c["to_id"], c["summary"], c["metadata"], f"compactions[{i}]",
                                id=c["id"], created_at=c["created_at"]) for i, c in enumerate(plan["compactions"])],
        whole=WholeSession(created_at=plan["created_at"], updated_at=plan["updated_at"],
                           frozen_prompt=plan["frozen_prompt"], pins=plan["pins"],
                           context_blocks=plan["context_blocks"]),
    )


def import_export_data(store, data, *, session_id=None, tenant_id="default", agent_id=None,
                       replace=False) -> Session:
    """``memorylab.import_session``: a parsed export written by the import pipeline; its Session."""
    report = write_sessions(store, [whole_session(data)], source="the export", format_name=FORMAT.name,
                            agent_id=agent_id, tenant_id=tenant_id, session_id=session_id, replace=replace)
    (written,) = report.sessions
    return Session.open(store, written.session_id, tenant_id=tenant_id, agent_id=written.agent_id)
