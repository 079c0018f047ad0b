import pytest

from memorylab import InvalidMessageError, NotFoundError
from memorylab.history.overlays import shown_overlay_ids
from tests.helpers import ids, text_message


@pytest.fixture
def linear(session):
    for i in range(1, 11):
        session.append_message(text_message(f"m{i}", f"turn {i}", "user" if i % 2 else "assistant"))
    return session


def test_single_overlay_replaces_its_range_on_read(linear):
    overlay = linear.add_compaction("summary of 3-7", "m3", "m7")
    history = linear.get_history()
    assert ids(history) == ["m1", "m2", f"compaction_{overlay['id']}", "m8", "m9", "m10"]
    summary = history[2]
    assert summary["role"] == "assistant"
    assert summary["parts"] == [{"type": "text", "text": "summary of 3-7"}]
    assert summary["metadata"]["compaction"]["covered_messages"] == 5
    # originals are kept
    assert len(linear.get_history(apply_compactions=False)) == 10
    assert linear.get_message("m5")["parts"][0]["text"] == "turn 5"


def test_the_overlays_a_history_shows_are_found_by_their_summaries(linear):
    superseded = linear.add_compaction("old summary", "m2", "m4")
    grown = linear.add_compaction("grown summary", "m2", "m6")
    later = linear.add_compaction("later summary", "m8", "m9")
    assert shown_overlay_ids(linear.get_history()) == {grown["id"], later["id"]}
    assert superseded["id"] not in shown_overlay_ids(linear.get_history())
    assert shown_overlay_ids(linear.get_history(apply_compactions=False)) == set()


def test_newest_overlay_from_the_same_start_wins(linear):
    linear.add_compaction("old summary", "m2", "m4")
    newer = linear.add_compaction("grown summary", "m2", "m8")
    history = linear.get_history()
    assert ids(history) == ["m1", f"compaction_{newer['id']}", "m9", "m10"]
    assert len(linear.get_compactions()) == 2


def test_overlay_is_branch_local(linear):
    # sibling branch forks at m5: it shares m1..m5 but not m6..m10
    linear.append_message(text_message("b6", "branch reply", "assistant"), parent_id="m5")
    linear.append_message(text_message("b7", "branch follow-up"))
    overlay = linear.add_compaction("main branch summary", "m3", "m8")
    assert f"compaction_{overlay['id']}" in ids(linear.get_history("m10"))
    assert ids(linear.get_history("b7")) == ["m1", "m2", "m3", "m4", "m5", "b6", "b7"]
    # an overlay made on the sibling branch does not show on the main one
    side = linear.add_compaction("side summary", "m2", "b6")
    assert ids(linear.get_history("b7")) == ["m1", f"compaction_{side['id']}", "b7"]
    assert f"compaction_{side['id']}" not in ids(linear.get_history("m10"))


def test_overlay_ending_at_the_leaf_covers_everything_after_start(linear):
    overlay = linear.add_compaction("all", "m1", "m10")
    assert ids(linear.get_history()) == [f"compaction_{overlay['id']}"]


def test_overlay_ends_must_exist_and_be_ordered(linear):
    with pytest.raises(NotFoundError):
        linear.add_compaction("x", "m1", "nope")
    with pytest.raises(InvalidMessageError, match="not on the path"):
        linear.add_compaction("backwards", "m7", "m3")
    assert linear.get_compactions() == []


def test_remove_compaction_restores_the_originals(linear):
    overlay = linear.add_compaction("s", "m2", "m9")
    linear.remove_compaction(overlay["id"])
    assert len(linear.get_history()) == 10
    with pytest.raises(NotFoundError):
        linear.remove_compaction(overlay["id"])


def test_history_tokens_use_stored_estimates_and_summary(linear):
    before = linear.get_history_tokens()
    assert before == sum(m["tokens"] for m in linear.get_history(apply_compactions=False))
    linear.add_compaction("short", "m1", "m9")
    assert linear.get_history_tokens() < before
