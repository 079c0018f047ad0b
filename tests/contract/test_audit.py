"""The compaction audit on both backends: what an overlay's summary, head, tail and pins keep of the
span it replaced, and what they lost."""
import json

import pytest

from memorylab import NotFoundError, Session
from memorylab.audit import audit_compaction, audit_proposal, audit_session, iter_store_audits, retention_totals
from tests.helpers import text_message

PLANTED = [
    ("user", "The deploy of ledgerline fails since this morning. The config is in deploy/prod/settings.toml."),
    ("assistant", "I ran `$ make deploy ENV=prod` and it stopped at the health check; the runbook is "
                  "https://wiki.example.com/runbooks/ledgerline-deploy for reference."),
    ("user", "Ticket PAY-2291 tracks it. The budget for the fix is 1,500 EUR and the release is due 2026-11-15."),
    ("assistant", "We'll use the blue-green rollout for the retry, so production never goes down."),
    ("user", "Thanks, go ahead."),
    ("assistant", "Starting the rollout now."),
]


def planted_session(store, session_id="planted"):
    session = Session.create(store, session_id)
    for i, (role, text) in enumerate(PLANTED):
        session.append_message(text_message(f"m{i}", text, role))
    return session


def lost(audit):
    return sorted((a["kind"], a["text"]) for a in audit.lost)


def test_planted_span_reports_exactly_what_no_part_of_the_request_holds(store):
    session = planted_session(store)
    # The summary keeps the path and the ticket; the tail (m4, m5 stay after the span) repeats nothing;
    # a later message... is added below, after the compaction, and must not count.
    overlay = session.add_compaction(
        "User reported a failing deploy; config in deploy/prod/settings.toml. Tracked as PAY-2291.", "m0", "m3")
    audit = audit_compaction(session, overlay["id"])
    assert lost(audit) == [
        ("command", "make deploy ENV=prod"),
        ("date", "2026-11-15"),
        ("decision", "We'll use the blue-green rollout for the retry, so production never goes down."),
        ("quantity", "1,500 EUR"),
        ("url", "https://wiki.example.com/runbooks/ledgerline-deploy"),
    ]
    assert sorted((a["kind"], a["text"], a["where"]) for a in audit.kept) == [
        ("identifier", "PAY-2291", "summary"), ("path", "deploy/prod/settings.toml", "summary")]
    assert {a["message_id"] for a in audit.lost} == {"m1", "m2", "m3"}
    assert audit.span_messages == 4 and audit.span_tokens == sum(
        m["tokens"] for m in session.get_history(apply_compactions=False)[:4])
    assert 0 < audit.summary_tokens < audit.span_tokens
    assert audit.retention == {"path": 1.0, "command": 0.0, "url": 0.0, "identifier": 1.0, "quantity": 0.0,
                               "date": 0.0, "decision": 0.0}


def test_a_tail_that_repeats_an_artifact_keeps_it_and_a_pin_keeps_its_own(store):
    session = Session.create(store, "tail")
    for i, (role, text) in enumerate(PLANTED[:4]):
        session.append_message(text_message(f"m{i}", text, role))
    session.append_message(text_message("m4", "Reminder: the release date 15 Nov 2026 still holds.", "user"))
    session.pin("m2")
    overlay = session.add_compaction("A deploy failure was discussed.", "m0", "m3")
    audit = audit_compaction(session, overlay["id"])
    where = {a["text"]: a["where"] for a in audit.kept}
    assert where["2026-11-15"] == "pin"  # m2 is pinned: the whole message stays in the request
    assert where["PAY-2291"] == "pin"
    assert ("date", "2026-11-15") not in lost(audit)
    assert lost(audit) == [
        ("command", "make deploy ENV=prod"),
        ("decision", "We'll use the blue-green rollout for the retry, so production never goes down."),
        ("path", "deploy/prod/settings.toml"),
        ("url", "https://wiki.example.com/runbooks/ledgerline-deploy"),
    ]
    session.unpin("m2")
    unpinned = audit_compaction(session, overlay["id"])
    assert {a["text"]: a["where"] for a in unpinned.kept}["2026-11-15"] == "tail"  # the tail's written date
    assert ("identifier", "PAY-2291") in lost(unpinned)


def test_messages_written_after_the_compaction_do_not_hide_a_loss(store):
    session = planted_session(store)
    overlay = session.add_compaction("A deploy failure was discussed.", "m0", "m3", metadata={
        "created_at": "2000-01-01T00:00:00Z"})  # an imported compaction: the agent compacted long ago
    session.append_message(text_message("later", "Found it again: deploy/prod/settings.toml", "user"))
    audit = audit_compaction(session, overlay["id"])
    assert ("path", "deploy/prod/settings.toml") in lost(audit)
    assert not any(a["where"] == "tail" for a in audit.kept)


def test_chained_compactions_each_judged_against_their_own_request(store):
    session = planted_session(store)
    first = session.add_compaction("Deploy fails; config deploy/prod/settings.toml; runbook "
                                   "https://wiki.example.com/runbooks/ledgerline-deploy", "m0", "m1")
    second = session.add_compaction("Deploy fails (PAY-2291).", "m0", "m4")
    audits = {a.overlay_id: a for a in audit_session(session)}
    assert set(audits) == {first["id"], second["id"]}
    assert ("url", "https://wiki.example.com/runbooks/ledgerline-deploy") not in lost(audits[first["id"]])
    assert ("url", "https://wiki.example.com/runbooks/ledgerline-deploy") in lost(audits[second["id"]])
    totals = retention_totals(audits.values())
    assert totals["url"] == {"kept": 1, "lost": 1}
    assert json.loads(json.dumps(audits[second["id"]].to_dict()))["lost"]


def test_unknown_overlay_and_session_are_named(store):
    session = planted_session(store)
    with pytest.raises(NotFoundError, match="no overlay 7"):
        audit_compaction(session, 7)
    with pytest.raises(NotFoundError, match="no session ghost"):
        list(iter_store_audits(store, ["ghost"]))


def test_store_audits_cover_every_session_with_overlays(store):
    planted_session(store, "a").add_compaction("Deploy fails.", "m0", "m3")
    planted_session(store, "b")
    audits = list(iter_store_audits(store))
    assert [(a.session_id, a.overlay_id) for a in audits] == [("a", 1)]


def test_a_proposed_summary_is_audited_before_it_is_written(store):
    session = planted_session(store)
    proposal = audit_proposal(session, "Deploy fails; ticket PAY-2291; due 2026-11-15.", "m0", "m3")
    assert ("identifier", "PAY-2291") not in lost(proposal) and ("date", "2026-11-15") not in lost(proposal)
    assert ("path", "deploy/prod/settings.toml") in lost(proposal)
    assert session.get_compactions() == []  # nothing written


def test_many_sessions_are_audited_by_worker_processes_in_the_same_order(store, monkeypatch):
    from memorylab.audit import audit as audit_module

    for name in ("a", "b", "c", "d"):
        planted_session(store, name).add_compaction(f"Deploy {name} fails; ticket PAY-2291.", "m0", "m3")
    alone = [a.to_dict() for a in iter_store_audits(store, workers=1)]
    monkeypatch.setattr(audit_module, "PARALLEL_FROM", 2)
    monkeypatch.setattr(audit_module, "_CHUNK", 1)
    shared = [a.to_dict() for a in iter_store_audits(store, workers=2)]
    assert shared == alone and len(alone) == 4


def test_an_overlay_whose_span_is_no_branch_is_reported_and_the_others_still_audited(tmp_path):
    import sqlite3

    from memorylab import Store

    path = tmp_path / "lab.db"
    with Store(path) as store:
        session = planted_session(store)
        session.add_compaction("Deploy fails.", "m0", "m1")
        session.add_compaction("Deploy fails; PAY-2291.", "m0", "m3")
    with sqlite3.connect(path) as conn:  # damaged behind memorylab's back
        conn.execute("UPDATE compactions SET from_id = 'm5' WHERE id = 1")
    with Store(path) as store:
        first, second = audit_session(Session.open(store, "planted"))
    assert first.error and "is not one stored branch" in first.error and first.to_dict()["error"] == first.error
    assert second.error is None and ("identifier", "PAY-2291") not in lost(second)
