"""What the scale pages compute once per branch and reuse: the message budget for any number of
messages kept whole, and the request size from a history the page has already read."""
import pytest

from memorylab import InvalidInputError
from memorylab.history.budget import HistoryBudget, request_breakdown
from memorylab.history.truncation import truncate_older_messages
from memorylab.tokens import compact_json, estimate_message_tokens, estimate_string_tokens
from tests.helpers import text_message


def tool_turn(message_id, output):
    return {"id": message_id, "role": "assistant", "parts": [
        {"type": "text", "text": "let me look"},
        {"type": "tool-read", "toolCallId": f"call-{message_id}", "toolName": "read", "input": {"path": "a"},
         "output": output, "state": "output-available"}]}


@pytest.fixture
def branch(session):
    """Long texts and long tool outputs spread through the branch, with a summary over its start."""
    for number in range(12):
        session.append_message(text_message(f"u{number}", ("word " * 2500) if number % 4 == 0 else f"ask {number}"))
        session.append_message(tool_turn(f"a{number}", "x" * (2000 if number % 3 == 0 else 40)))
    session.add_compaction("the first turns", "u0", "a1")
    return session


def test_each_setting_of_the_kept_messages_matches_micro_compaction_itself(branch):
    history = branch.get_history()
    budget = HistoryBudget(history)
    for keep_recent in range(len(history) + 2):
        sent = truncate_older_messages(history, keep_recent=keep_recent)
        rows = {(r["part"], r["item"]): r["tokens"] for r in budget.rows(keep_recent)}
        assert sum(rows.values()) == estimate_message_tokens(sent)
        outputs = sum(estimate_string_tokens(compact_json(p["output"])) for m in sent for p in m["parts"]
                      if "output" in p)
        assert rows[("messages", "tool outputs")] == outputs
        assert rows[("summaries", history[0]["id"])] == history[0]["tokens"]
    assert budget.rows(0) != budget.rows(len(history))  # cutting the older messages changes the request


def test_the_breakdown_rows_come_summaries_first_and_leave_out_empty_parts(branch):
    rows = request_breakdown(branch, micro_compaction={"keep_recent": 2})
    parts = [r["part"] for r in rows]
    assert parts.index("summaries") < parts.index("messages")
    assert all(r["tokens"] for r in rows)
    assert [r["item"] for r in rows if r["part"] == "messages"] == ["user messages", "assistant messages",
                                                                  "tool outputs"]


def test_a_negative_setting_is_refused(branch):
    with pytest.raises(InvalidInputError, match="keep_recent"):
        HistoryBudget(branch.get_history()).rows(-1)


def test_a_history_read_once_gives_the_same_request_size(branch):
    history = branch.get_history()
    leaf_id = branch.get_latest_leaf_id()
    assert branch.estimate_context_tokens(leaf_id, history=history) == branch.estimate_context_tokens(leaf_id)
    assert list(branch.compaction_context(leaf_id, history=history)) == history
