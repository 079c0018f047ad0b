"""Auditing transcript files a user already has: each imported into a throwaway in-memory store.

A folder is read one group at a time: the files directly in it form one group, and each folder under
it (a Claude Code project folder, with its subagent files below it) another. A group is imported
into its own in-memory store, audited and dropped, so a folder of thousands of transcripts is audited
in the memory of its largest project, and a subagent file still joins the session it belongs to.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import ImportFormatError, MemoryLabError
from ..store import Store
from .audit import CompactionAudit, iter_store_audits


def _groups(folder: Path) -> list[list[Path]]:
    from ..importers import SOURCE_SUFFIXES, source_files

    top = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in SOURCE_SUFFIXES)
    below = [source_files(sub) for sub in sorted(p for p in folder.iterdir() if p.is_dir())]
    return [group for group in ([top] if top else []) + below if group]


def audit_files(path, *, progress: Callable[[int, int], None] | None = None,
                skipped: Callable[[Path, str], None] | None = None) -> Iterator[CompactionAudit]:
    """The audits of every compaction in the transcript file or folder ``path``.

    ``progress(files_done, files_total)`` is called after each file; ``skipped(file, reason)`` for a
    file that is not a format memorylab imports or cannot be read (the others are still audited).
    """
    from ..importers import import_source

    path = Path(path)
    if not path.exists():
        raise ImportFormatError(f"{path}: no such file or folder")
    groups = _groups(path) if path.is_dir() else [[path]]
    total, done = sum(map(len, groups)), 0
    for group in groups:
        with Store(":memory:") as store:
            for file in group:
                try:
                    import_source(store, file)
                except MemoryLabError as error:
                    if path.is_file():
                        raise
                    if skipped:
                        skipped(file, str(error))
                done += 1
                if progress:
                    progress(done, total)
            yield from iter_store_audits(store)
