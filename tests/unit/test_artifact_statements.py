"""Decisions and constraints are found case-blind: the ledger reads a lowered copy of most texts, and
the case-blind regex where lowering would not match the same (İ, ı, ſ)."""
from memorylab.audit.artifacts import message_artifacts


def decisions(text, role="assistant"):
    message = {"id": "m1", "role": role, "parts": [{"type": "text", "text": text}]}
    return [a.text for a in message_artifacts(message) if a.kind == "decision"]


def test_a_decision_is_found_whatever_its_case():
    assert decisions("WE'LL USE the blue-green rollout for the retry.") == [
        "WE'LL USE the blue-green rollout for the retry."]
    assert decisions("We’ll ship it — going forward, we will use Postgres for the ledger.") == [
        "We’ll ship it — going forward, we will use Postgres for the ledger."]


def test_letters_that_lowering_would_change_still_match_case_blind():
    # ſ (long s) matches "s" case-blind but lowers to itself; İ lowers to two characters.
    assert decisions("We'll uſe the İstanbul mirror for the downloads.") == [
        "We'll uſe the İstanbul mirror for the downloads."]
    assert decisions("Never puſh to main on a Friday.", role="user") == ["Never puſh to main on a Friday."]
