"""Compaction through a Session: overlays written from plans, auto-trigger, failures, row-size limit."""
import warnings

import pytest

from memorylab import InvalidInputError, Session
from memorylab.history.compaction import create_compact_function, plan_compaction
from tests.helpers import RecordingSummarizer, ids, text_message


def fill(session, count, prefix="m", words=40, parent=...):
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        message = text_message(f"{prefix}{i}", f"{prefix} turn {i}: " + "detail " * words, role)
        if parent is not ... and i == 0:
            session.append_message(message, parent_id=parent)
        else:
            session.append_message(message)


@pytest.fixture
def summarizer():
    return RecordingSummarizer()


def test_compact_writes_the_planned_overlay_and_keeps_originals(session, summarizer):
    fill(session, 30)
    settings = dict(protect_head=2, tail_token_budget=300, min_tail_messages=2)
    plan = plan_compaction(session.get_history(), **settings)
    session.on_compaction(create_compact_function(summarizer, **settings))
    overlay = session.compact()
    assert (overlay["from_id"], overlay["to_id"]) == (plan.from_id, plan.to_id)
    assert summarizer.prompts == [plan.prompt]
    history = session.get_history()
    assert ids(history) == ids(plan.head) + [f"compaction_{overlay['id']}"] + ids(plan.tail)
    assert overlay["metadata"]["tokens_before"] == plan.tokens_before
    assert session.get_path_length() == 30
    assert session.compaction_status["state"] == "compacted"


def test_iterative_compaction_grows_one_summary_per_branch(session, summarizer):
    fill(session, 20)
    session.on_compaction(create_compact_function(summarizer, protect_head=2, tail_token_budget=200))
    first = session.compact()
    fill(session, 10, prefix="n")
    second = session.compact()
    assert second["from_id"] == first["from_id"]
    assert "summary #1" in summarizer.prompts[1]  # the previous summary was handed over to update
    history = session.get_history()
    summaries = [m for m in history if m["id"].startswith("compaction_")]
    assert ids(summaries) == [f"compaction_{second['id']}"]
    assert summaries[0]["parts"][0]["text"] == "summary #2"
    fill(session, 10, prefix="o")
    third = session.compact()
    assert third["from_id"] == first["from_id"] and "summary #2" in summarizer.prompts[2]
    assert len([m for m in session.get_history() if m["id"].startswith("compaction_")]) == 1


def test_compaction_on_two_branches_stays_branch_local(session, summarizer):
    fill(session, 10)
    fill(session, 12, prefix="b", parent="m5")  # a second branch forking after m5
    session.on_compaction(create_compact_function(summarizer, protect_head=1, tail_token_budget=150))
    on_b = session.compact("b11")
    on_main = session.compact("m9")
    assert f"compaction_{on_b['id']}" in ids(session.get_history("b11"))
    assert f"compaction_{on_b['id']}" not in ids(session.get_history("m9"))
    assert f"compaction_{on_main['id']}" in ids(session.get_history("m9"))
    assert f"compaction_{on_main['id']}" not in ids(session.get_history("b11"))


def test_compact_rerenders_the_frozen_prompt(session, summarizer):
    session.with_context("memory", max_tokens=200)
    frozen = session.freeze_system_prompt()
    session.replace_context_block("memory", "learned during the turn")
    assert session.freeze_system_prompt() == frozen
    fill(session, 12)
    session.on_compaction(create_compact_function(summarizer, protect_head=1, tail_token_budget=100))
    session.compact()
    assert "learned during the turn" in session.freeze_system_prompt()


def test_compact_without_a_function_or_on_an_unknown_leaf(session, summarizer):
    fill(session, 3)
    with pytest.raises(InvalidInputError, match="on_compaction"):
        session.compact()
    session.on_compaction(create_compact_function(summarizer))
    with pytest.raises(LookupError):
        session.compact("nope")
    assert session.compact() is None  # three short messages: nothing to summarize
    assert session.compaction_status["state"] == "nothing_to_compact"


def test_auto_compaction_fires_strictly_over_the_threshold(session, summarizer):
    session.on_compaction(create_compact_function(summarizer, protect_head=1, tail_token_budget=120))
    fill(session, 6)
    session.compact_after(session.estimate_context_tokens())
    session.append_message(text_message("tiny", ""))  # exactly 4 more tokens: strictly over now
    assert len(summarizer.prompts) == 1
    assert any(m["id"].startswith("compaction_") for m in session.get_history())
    assert session.get_latest_leaf()["id"] == "tiny"


def test_auto_compaction_at_the_threshold_does_nothing(session, summarizer):
    session.on_compaction(create_compact_function(summarizer, protect_head=1, tail_token_budget=50))
    fill(session, 6)
    session.compact_after(session.estimate_context_tokens() + 4)
    session.append_message(text_message("tiny", ""))
    assert summarizer.prompts == []


@pytest.mark.filterwarnings("ignore:.*nothing to compact:RuntimeWarning")  # the first appends are too short
def test_failing_summarizer_never_loses_the_message(session):
    errors = []

    def broken(prompt):
        raise ConnectionError("model offline")

    session.on_compaction(create_compact_function(broken, protect_head=1, tail_token_budget=50))
    session.on_compaction_error(errors.append).compact_after(100)
    fill(session, 8)
    assert session.get_path_length() == 8
    assert errors and isinstance(errors[0], ConnectionError)
    assert session.compaction_status == {**session.compaction_status, "state": "error",
                                         "detail": "ConnectionError: model offline"}
    assert session.get_compactions() == []


def test_failure_without_a_handler_is_recorded_not_raised(session):
    session.on_compaction(lambda history: {"summary": "s", "from_id": "ghost", "to_id": "m1"}).compact_after(10)
    fill(session, 3)
    assert session.get_path_length() == 3
    assert "not on the branch" in session.compaction_status["detail"]


def test_a_failing_error_handler_is_logged_and_the_append_still_succeeds(session, caplog):
    def handler(error):
        raise RuntimeError("the handler itself broke")

    session.on_compaction(lambda history: {"summary": "s", "from_id": "ghost", "to_id": "m1"})
    session.on_compaction_error(handler).compact_after(10)
    with caplog.at_level("ERROR", logger="memorylab.history.session"):
        fill(session, 3)
    assert session.get_path_length() == 3
    assert session.compaction_status["state"] == "error"
    assert "the on_compaction_error handler failed" in caplog.text and "the handler itself broke" in caplog.text


@pytest.mark.parametrize("answer", [float("nan"), float("inf"), -float("inf"), "lots", None])
def test_a_counter_without_a_finite_number_counts_zero_and_never_compacts(session, summarizer, answer):
    session.on_compaction(create_compact_function(summarizer, protect_head=1, tail_token_budget=50))
    session.compact_after(100, token_counter=lambda history: answer)
    fill(session, 8)
    assert summarizer.prompts == [] and session.get_compactions() == []
    assert session.compaction_status is None
    assert session.estimate_context_tokens(token_counter=lambda history: answer) == \
        session.estimate_context_tokens(token_counter=lambda history: 0)


def test_the_counter_sees_the_system_prompt_and_blocks_and_reaches_the_boundaries(session, summarizer):
    def counter(context):
        seen.append(context)
        return sum(100 for _ in context) + len(context.system_prompt) // 4

    seen, compacted = [], []
    plain = create_compact_function(summarizer, protect_head=1, tail_token_budget=250)
    session.with_context("memory").replace_context_block("memory", "the customer is on the Pro plan " * 60)
    session.on_compaction(lambda context: compacted.append(context) or plain(context))
    session.compact_after(950, token_counter=counter)
    fill(session, 4, words=2)  # the stored estimates: about 30 tokens in all
    assert session.get_compactions() == [] and summarizer.prompts == []  # 400 + the prompt's ~510
    fill(session, 1, prefix="n", words=2)
    [context] = compacted
    assert "the customer is on the Pro plan" in context.system_prompt
    assert [block["label"] for block in context.blocks] == ["memory"]
    assert context.token_counter is counter and context.leaf_id == "n0"
    assert seen[-4:] == [[message] for message in context[-4:]]  # the planner counted message by message
    assert all(one.system_prompt == "" for one in seen[-4:])
    [overlay] = session.get_compactions()
    assert (overlay["from_id"], overlay["to_id"]) == ("m1", "m2")  # 100 a message: two fit in 250
    assert session.estimate_context_tokens() == counter(session.compaction_context())


def test_a_counter_that_raises_is_a_recorded_compaction_failure(session, summarizer):
    def counter(history):
        raise ValueError("cannot count")

    errors = []
    session.on_compaction(create_compact_function(summarizer)).on_compaction_error(errors.append)
    session.compact_after(100, token_counter=counter)
    fill(session, 2)
    assert session.get_path_length() == 2
    assert session.compaction_status["detail"] == "ValueError: cannot count"
    assert [str(error) for error in errors] == ["cannot count", "cannot count"]


def test_nothing_to_compact_is_said_once_not_retried_every_turn(session, summarizer):
    session.on_compaction(create_compact_function(summarizer, protect_head=50)).compact_after(50)
    with pytest.warns(RuntimeWarning, match="nothing to compact"):
        fill(session, 4, words=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        session.append_message(text_message("next", "short"))  # within 25% growth: no retry, no warning
    assert summarizer.prompts == []


def test_oversized_tool_output_is_shrunk_before_it_is_stored(session):
    huge = "row," * 1_300_000  # 5.2 MB
    stored = session.append_message({"id": "big", "role": "assistant", "parts": [
        {"type": "tool-export", "toolCallId": "c1", "toolName": "export", "input": {"table": "orders"},
         "output": huge, "state": "output-available"}]})
    record = stored["metadata"]["row_size_limit"]
    assert record["original_bytes"] > 5_000_000 and record["stored_bytes"] <= 1_800_000
    again = session.get_message("big")
    assert len(again["parts"][0]["output"]) < 1_800_000
    assert again["parts"][0]["input"] == {"table": "orders"}
    small = Session.create(session.store, "small").with_row_size_limit(4096)
    kept = small.append_message(text_message("t", "x" * 3000))
    assert "row_size_limit" not in kept["metadata"]
