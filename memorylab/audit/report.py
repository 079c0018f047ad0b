"""Audits as a person reads them (text) and as a program does (the ``memorylab audit --json`` shape)."""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TextIO

from .artifacts import KINDS
from .audit import CompactionAudit, retention_totals

_SHOWN_TEXT = 100


def audit_lines(audit: CompactionAudit) -> Iterator[str]:
    """One compaction: its size, then each lost artifact (kind, text, the message it came from)."""
    if audit.error:
        yield f"{audit.session_id} overlay {audit.overlay_id}: cannot be audited: {audit.error}"
        return
    kept = len(audit.kept)
    whole = kept + len(audit.lost)
    yield (f"{audit.session_id} overlay {audit.overlay_id}: {audit.span_messages} messages, {audit.span_tokens:,} "
           f"tokens -> {audit.summary_tokens:,}-token summary; kept {kept} of {whole} artifacts")
    for artifact in audit.lost:
        text = " ".join(artifact["text"].split())
        text = text if len(text) <= _SHOWN_TEXT else text[:_SHOWN_TEXT - 1] + "…"
        yield f"  lost {artifact['kind']:<10} {text}  (message {artifact['message_id']})"


def totals_lines(by_kind: dict[str, dict[str, int]], compactions: int) -> Iterator[str]:
    """The retention table over every compaction audited."""
    if not compactions:
        yield "no compactions found"
        return
    yield f"retention over {compactions:,} compaction(s):"
    yield f"  {'kind':<10} {'kept':>7} {'lost':>7} {'retained':>9}"
    for kind in KINDS:
        if kind in by_kind:
            kept, lost = by_kind[kind]["kept"], by_kind[kind]["lost"]
            yield f"  {kind:<10} {kept:>7,} {lost:>7,} {kept / (kept + lost):>9.0%}"
    kept = sum(c["kept"] for c in by_kind.values())
    lost = sum(c["lost"] for c in by_kind.values())
    if kept + lost:
        yield f"  {'all':<10} {kept:>7,} {lost:>7,} {kept / (kept + lost):>9.0%}"


class AuditWriter:
    """Prints each audit as it comes and, given ``json_out``, streams the JSON document to it; the
    totals are added up as audits pass, so nothing but the totals is held."""

    def __init__(self, out: TextIO, json_out: TextIO | None = None):
        self.out, self.json_out = out, json_out
        self.by_kind: dict[str, dict[str, int]] = {}
        self.count = 0
        if json_out:
            json_out.write('{"compactions": [')

    def add(self, audit: CompactionAudit) -> None:
        for line in audit_lines(audit):
            print(line, file=self.out)
        for kind, counts in retention_totals([audit]).items():
            total = self.by_kind.setdefault(kind, {"kept": 0, "lost": 0})
            total["kept"] += counts["kept"]
            total["lost"] += counts["lost"]
        if self.json_out:
            self.json_out.write(("," if self.count else "") + "\n" + json.dumps(audit.to_dict(), ensure_ascii=False))
        self.count += 1

    def close(self) -> None:
        for line in totals_lines(self.by_kind, self.count):
            print(line, file=self.out)
        if self.json_out:
            ordered = {kind: self.by_kind[kind] for kind in KINDS if kind in self.by_kind}
            self.json_out.write("\n], " + json.dumps({"totals": {"by_kind": ordered}})[1:] + "\n")


def write_audits(audits: Iterable[CompactionAudit], out: TextIO, json_out: TextIO | None = None) -> int:
    """Print ``audits`` and their totals; returns how many compactions there were."""
    writer = AuditWriter(out, json_out)
    for audit in audits:
        writer.add(audit)
    writer.close()
    return writer.count
