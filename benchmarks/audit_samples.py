"""What compactions lose, by kind, on the sample conversations and the real-shaped Claude Code transcripts.

    python benchmarks/audit_samples.py [--markdown] [--json PATH]

Each sample conversation is compacted once as the Compaction lab's defaults would (three messages of
head, a quarter of the branch's tokens of tail) with the extractive summarizer (no model), and each
Claude Code fixture in tests/data/claude_code is imported with the compactions Claude Code recorded;
then every compaction is audited (``memorylab.audit``) and the artifacts kept and lost are counted
per kind, for each group.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memorylab import Session, Store, load_samples  # noqa: E402  (the checkout's memorylab)
from memorylab.audit import KINDS, iter_store_audits, retention_totals  # noqa: E402
from memorylab.experiments.extractive import extractive_summary  # noqa: E402
from memorylab.experiments.strategies import default_tail_budget  # noqa: E402
from memorylab.history.compaction import plan_compaction  # noqa: E402
from memorylab.importers import import_source  # noqa: E402

CLAUDE_CODE = ROOT / "tests" / "data" / "claude_code"


def compacted_samples(store) -> None:
    for row in store.sessions.list():
        session = Session(store, row["session_id"], tenant_id=row["tenant_id"], agent_id=row["agent_id"])
        history = session.get_history()
        plan = plan_compaction(history, tail_token_budget=default_tail_budget(history))
        if plan is not None:
            summary = extractive_summary(plan.middle, plan.target_summary_tokens)
            session.add_compaction(summary, plan.from_id, plan.to_id)


def group_totals() -> dict[str, tuple[int, dict]]:
    """``{group: (compactions, {kind: {"kept", "lost"}})}``."""
    groups = {}
    with Store(":memory:") as store:
        load_samples(store)
        compacted_samples(store)
        audits = list(iter_store_audits(store))
        groups["sample sessions, extractive compaction"] = (len(audits), retention_totals(audits))
    with Store(":memory:") as store:
        for path in sorted(CLAUDE_CODE.glob("*.jsonl")):
            import_source(store, path)
        audits = list(iter_store_audits(store))
        groups["Claude Code fixtures, their own compactions"] = (len(audits), retention_totals(audits))
    return groups


def print_table(groups, markdown) -> None:
    headers = ("kind", *(f"{name} ({count})" for name, (count, _) in groups.items()))
    rows = []
    for kind in KINDS:
        cells = []
        for _, totals in groups.values():
            counts = totals.get(kind)
            cells.append("-" if not counts else
                         f"{counts['lost']} of {counts['kept'] + counts['lost']} lost")
        rows.append((kind, *cells))
    if markdown:
        print("| " + " | ".join(headers) + " |\n|" + "---|" * len(headers))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
        for row in [headers, *rows]:
            print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)))
    print("\nsource: python benchmarks/audit_samples.py" + (" --markdown" if markdown else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--json", metavar="PATH", help="also write the counts as JSON: {group: {compactions, kinds}}")
    args = parser.parse_args()
    groups = group_totals()
    print_table(groups, args.markdown)
    if args.json:
        data = {name: {"compactions": count, "kinds": totals} for name, (count, totals) in groups.items()}
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
