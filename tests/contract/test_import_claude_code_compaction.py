"""A Claude Code compaction whose boundary names a logical parent the transcript does not hold.

Claude Code writes a ``compact_boundary`` with ``parentUuid: null`` and the message it follows in
``logicalParentUuid``; real transcripts (2.1.x) sometimes name there a uuid written nowhere. The
compaction is still an overlay over what the file held before it.
"""
from pathlib import Path

from memorylab import Session
from memorylab.importers import import_source

MID_FILE = Path(__file__).resolve().parent.parent / "data" / "claude_code" / "compacted-mid-file.jsonl"


def entry(n):
    return f"b07a{n:04d}-6d2e-4c81-9a3f-5e7b1c0d4f26"


def test_a_compaction_whose_logical_parent_is_in_no_entry_is_an_overlay_over_the_span_before_it(store):
    report = import_source(store, MID_FILE)
    assert (report.messages_found, report.overlays_added, report.sessions[0].branches) == (6, 1, 1)
    session = Session.open(store, report.sessions[0].session_id, agent_id="claude-code")

    stored = session.get_history(apply_compactions=False)
    assert [m["id"] for m in stored] == [entry(n) for n in (1, 2, 4, 5, 10, 11)]
    assert stored[4]["parent_id"] == entry(5)  # the conversation goes on from where the file was
    assert len(session.get_leaves()) == 1

    (overlay,) = session.get_compactions()
    assert (overlay["from_id"], overlay["to_id"]) == (entry(1), entry(5))
    assert overlay["summary"].startswith("This session is being continued from a previous conversation")
    assert overlay["metadata"] == {"source_id": entry(9), "boundary_id": entry(8),
                                   "created_at": "2026-02-09T16:24:40.551Z", "trigger": "manual",
                                   "pre_tokens": 61437}
    assert session.get_message(entry(9)) is None  # the summary is the overlay, not a message

    history = session.get_history()
    assert [m["parts"][0]["text"] for m in history][1:] == [
        "Fix it and add a test for March.",
        "Fixed: balance() no longer subtracts refunds again, and tests/test_report.py checks the March total."]
    assert history[0]["parts"][0]["text"] == overlay["summary"]
