"""Importing other systems' agent memory: detect a source's format, read it, write it once.

``import_source(store, path)`` detects the format by content (or takes ``format=``), reads the
source's conversations and writes them in one transaction; importing the same source again adds
only what it gained since. ``import_folder`` does so for every file under a folder (a
``~/.codex/sessions`` tree). Each format lives in its own module as a ``SourceFormat``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import ImportFormatError, InvalidInputError
from . import claude_code, codex, langgraph, llm_logs, memorylab_export, openai_agents, openai_messages, otel
from .formats import SourceFormat, SourceProbe
from .source import PREVIOUS, SourceMessage, SourceOverlay, SourceSession
from .spool import ReadBudget, spool
from .writer import ImportReport, SessionImport, write_sessions

FORMATS = {
    f.name: f
    for f in (
        # Databases first: their tables tell them apart for certain. Then the text formats, the most
        # specific first: an OpenAI message list is what a transcript or an export is not.
        openai_agents.FORMAT, langgraph.FORMAT, llm_logs.FORMAT,
        memorylab_export.FORMAT, claude_code.FORMAT, codex.FORMAT, otel.FORMAT, openai_messages.FORMAT,
    )
}
"""Every importable format by its ``--format`` name, in detection order."""


def detect_format(path) -> SourceFormat:
    """The format of the file at ``path``, told by its content; ImportFormatError when none fits."""
    path = Path(path)
    if not path.is_file():
        raise ImportFormatError(f"{path}: no such file")
    probe = SourceProbe(path)
    for source_format in FORMATS.values():
        if source_format.detect(probe):
            return source_format
    kinds = "; ".join(f.label for f in FORMATS.values())
    raise ImportFormatError(f"{path}: not a format memorylab imports (it reads: {kinds})")


def source_format(name) -> SourceFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise ImportFormatError(f"unknown format {name!r}; choose one of: auto, {', '.join(FORMATS)}") from None


def import_source(store, path, *, format="auto", agent_id=None, tenant_id=None, dry_run=False,
                  progress=None, name=None, budget: ReadBudget | None = None, session_id=None,
                  replace=False) -> ImportReport:
    """Import every conversation in the file at ``path`` into ``store`` and report what was added.

    ``format`` is a name of ``FORMATS`` or "auto" (detected by content). Sessions are filed under
    ``agent_id``, by default the format's own agent (``claude-code``, ``openai-agents``...), and
    ``tenant_id`` ("default", whatever tenant a memorylab export names), with their ids from the
    source (a memorylab export keeps its own; a namesake from another source becomes ``id~2``...).
    ``dry_run`` writes nothing and reports what an import would add, or refuses what it would refuse.
    ``progress(messages_read)`` is called every thousand messages and at the end. ``name`` is how
    reports and the sessions' metadata call the source (default: the path), e.g. an uploaded file's name.
    The source is read whole, into a spool on disk, before the write transaction begins, within
    ``budget`` (default ``ReadBudget.configured()``: 600 s and 8 GiB unless the environment says otherwise).
    ``session_id`` and ``replace`` apply to a format of whole sessions (a memorylab export): the id to
    store it under, and whether it replaces a stored session of that id (else a ConflictError).
    """
    path, tenant_id = Path(path), tenant_id or "default"
    chosen = detect_format(path) if format == "auto" else source_format(format)
    if not path.is_file():
        raise ImportFormatError(f"{path}: no such file")
    if (session_id or replace) and not chosen.whole_sessions:
        raise InvalidInputError(f"session_id and replace apply to a memorylab export; {path} is {chosen.label}, "
                                "whose sessions keep their ids and are merged, never replaced")
    spooled = spool(chosen.read, path, name or path, budget or ReadBudget.configured())
    try:
        return write_sessions(
            store, spooled.replay(), source=name or path, format_name=chosen.name,
            agent_id=agent_id or chosen.agent_id, tenant_id=tenant_id or "default", dry_run=dry_run, progress=progress,
            session_id=session_id, replace=replace,
        )
    finally:
        spooled.close()


SOURCE_SUFFIXES = (".jsonl", ".json", ".db", ".sqlite", ".sqlite3")
"""The files a folder import (and audit) reads; any other file in the folder is not looked at."""


def source_files(folder) -> list[Path]:
    """The files under ``folder`` a folder import reads, in path order (a Codex tree's by date)."""
    return sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES)


def import_folder(store, folder, *, skipped: Callable[[Path, str], None] | None = None,
                  **options) -> Iterator[ImportReport]:
    """The report of each import of a file under ``folder`` (``import_source`` with ``options``), in path
    order. Each file is an import of its own, in its own transaction; a file of no format memorylab
    imports is passed to ``skipped(file, reason)``, and one it refuses stops the folder there (the files
    before it stay imported, and importing the folder again adds only what is new)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ImportFormatError(f"{folder}: no such folder")
    for file in source_files(folder):
        try:
            chosen = detect_format(file)
        except ImportFormatError as error:
            if skipped:
                skipped(file, str(error))
            continue
        yield import_source(store, file, **{"format": chosen.name, **options})


__all__ = [
    "FORMATS", "ImportReport", "PREVIOUS", "ReadBudget", "SessionImport", "SourceFormat", "SourceMessage",
    "SourceOverlay",
    "SourceProbe", "SourceSession", "detect_format", "import_folder", "import_source", "source_format",
    "write_sessions",
]
