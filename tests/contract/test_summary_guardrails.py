"""Guardrails on compaction, on both backends: a summary that loses what its span said is flagged
before it is accepted, and an undone summary stays retrievable until it is restored."""
import pytest

from memorylab import NotFoundError
from memorylab.audit import audit_proposal, summary_warnings
from memorylab.history.removed_summaries import KEPT_REMOVED
from tests.contract.test_audit import planted_session

FAITHFUL = ("Deploy of ledgerline fails at the health check after `$ make deploy ENV=prod`; config in "
            "deploy/prod/settings.toml, runbook https://wiki.example.com/runbooks/ledgerline-deploy. Ticket "
            "PAY-2291, budget 1,500 EUR, release due 2026-11-15. Decision: blue-green rollout for the retry, so "
            "production never goes down.")


@pytest.fixture
def session(store):
    return planted_session(store, "deploy")


def test_a_summary_that_says_nothing_is_flagged_as_too_short_and_keeping_nothing(session):
    warnings = summary_warnings(audit_proposal(session, "I'm ready to help", "m0", "m3"))
    assert len(warnings) == 2
    assert warnings[0].startswith("It is ") and "standing in for 4 messages" in warnings[0]
    assert warnings[1].startswith("It keeps none of the ") and "the next request holds none of them" in warnings[1]


def test_a_summary_that_keeps_what_its_span_said_is_not_flagged(session):
    audit = audit_proposal(session, FAITHFUL, "m0", "m3")
    assert audit.kept and summary_warnings(audit) == []


def test_a_summary_that_loses_most_of_its_span_is_flagged_with_the_share(session):
    warnings = summary_warnings(audit_proposal(
        session, "The ledgerline deploy is failing and a retry with a new rollout is planned for it; "
                 "ticket PAY-2291 tracks the work, and the team agreed to go ahead with it.", "m0", "m3"))
    assert len(warnings) == 1 and warnings[0].startswith("It loses ") and "%)" in warnings[0]


def test_undo_keeps_the_removed_summary_and_restore_brings_it_back(session):
    overlay = session.add_compaction(FAITHFUL, "m0", "m3", metadata={"by": "hand"})
    session.remove_compaction(overlay["id"])
    assert [m["id"] for m in session.get_history()] == [f"m{i}" for i in range(6)]
    removed = session.removed_compactions()
    assert [(r["id"], r["summary"], r["from_id"], r["to_id"]) for r in removed] == [
        (overlay["id"], FAITHFUL, "m0", "m3")]
    assert removed[0]["removed_at"] and removed[0]["metadata"] == {"by": "hand"}

    restored = session.restore_compaction(overlay["id"])
    assert restored["summary"] == FAITHFUL and restored["metadata"] == {"by": "hand", "restored_from": overlay["id"]}
    assert session.get_history()[0]["parts"][0]["text"].endswith(FAITHFUL)
    assert session.removed_compactions() == []
    with pytest.raises(NotFoundError, match="removed_compactions"):
        session.restore_compaction(overlay["id"])


def test_the_newest_removed_summaries_are_kept_and_an_id_taken_again_restores_the_newest(session):
    for number in range(KEPT_REMOVED + 2):
        session.remove_compaction(session.add_compaction(f"summary {number}", "m0", "m3")["id"])
    removed = session.removed_compactions()
    assert len(removed) == KEPT_REMOVED and removed[0]["summary"] == f"summary {KEPT_REMOVED + 1}"
    assert {r["id"] for r in removed} == {1}  # each overlay took the id the one before had
    assert session.restore_compaction(1)["summary"] == f"summary {KEPT_REMOVED + 1}"
    assert session.removed_compactions()[0]["summary"] == f"summary {KEPT_REMOVED}"
