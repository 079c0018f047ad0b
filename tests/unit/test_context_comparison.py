"""Two contexts compared message by message: "identical" only when every message is the same in full,
a change anywhere (even past the last four messages or the first 400 characters) shows as its own
unified diff, and messages only one context holds are named with their tokens."""
from memorylab.experiments import compare_contexts
from tests.helpers import text_message

LONG = "word " * 200  # a thousand characters: what a 400-character preview would cut


def conversation(count=8):
    return [text_message(f"m{n}", f"message {n}: {LONG}", "user" if n % 2 else "assistant") for n in range(count)]


def test_the_same_messages_are_identical():
    comparison = compare_contexts(conversation(), conversation(), "a", "b")
    assert comparison.identical and comparison.diff_text() == ""
    assert comparison.summary().startswith("The two contexts are identical: 8 messages")


def test_a_change_early_and_past_the_preview_is_found_and_diffed():
    changed = conversation()
    changed[1] = text_message("m1", f"message 1: {LONG}tail that differs", "user")
    comparison = compare_contexts(conversation(), changed, "full", "edited")
    assert not comparison.identical
    assert comparison.counts() == {"same": 7, "changed": 1, "only in the first": 0, "only in the second": 0}
    (row,) = [c for c in comparison.changes if c.status == "changed"]
    assert (row.first, row.second, row.role) == (2, 2, "user")
    assert row.diff.startswith("--- full message 2 (user)\n+++ edited message 2 (user)")
    assert "+message 1: " + LONG + "tail that differs" in row.diff


def test_a_tool_part_is_compared_in_full():
    first, second = conversation(2), conversation(2)
    for context, output in ((first, "x" * 500 + "A"), (second, "x" * 500 + "B")):
        context[1]["parts"].append({"type": "tool-search", "toolCallId": "c1", "output": output})
    comparison = compare_contexts(first, second)
    assert [c.status for c in comparison.changes] == ["same", "changed"]


def test_a_summary_in_place_of_a_span_shows_what_each_side_alone_holds():
    full = conversation(8)
    summary = {"id": "summary:x", "role": "system", "tokens": 40, "parts": [{"type": "text", "text": "A summary."}]}
    compacted = [*full[:2], summary, *full[6:]]
    comparison = compare_contexts(full, compacted, "full-history", "extractive")
    counts = comparison.counts()
    assert counts == {"same": 4, "changed": 0, "only in the first": 4, "only in the second": 1}
    assert [(c.status, c.first, c.second) for c in comparison.changes][2:7] == [
        ("only in the first", 3, None), ("only in the first", 4, None), ("only in the first", 5, None),
        ("only in the first", 6, None), ("only in the second", None, 3)]
    assert comparison.second_tokens < comparison.first_tokens
    assert "4 only in full-history, 1 only in extractive" in comparison.summary()
    assert list(comparison.frame().columns) == ["status", "first", "second", "role", "first_tokens", "second_tokens"]


def test_a_shortened_message_keeping_its_id_is_a_change_not_a_removal():
    full = conversation(6)
    shortened = [dict(m) for m in full]
    shortened[0] = text_message("m0", "message 0: cut", "assistant")
    shortened[3] = text_message("m3", "message 3: cut", "user")
    comparison = compare_contexts(full, shortened)
    assert [c.status for c in comparison.changes] == ["changed", "same", "same", "changed", "same", "same"]
