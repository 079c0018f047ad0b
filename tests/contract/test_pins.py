"""Pins: a pinned message is never inside a compaction's summarized span, on both backends."""
import time

import pytest

from memorylab import Experiments, InvalidInputError, NotFoundError, Session, lint_tool_pairs
from memorylab.display.treeview import SessionTree
from memorylab.history.compaction import create_compact_function, plan_compaction
from memorylab.io import export_session, import_session
from tests.helpers import RecordingSummarizer, ids, text_message

SETTINGS = dict(protect_head=2, tail_token_budget=300, min_tail_messages=2)


def fill(session, count, prefix="m"):
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        session.append_message(text_message(f"{prefix}{i}", f"{prefix} turn {i}: " + "detail " * 40, role))


def compact(session, **settings):
    summarizer = RecordingSummarizer()
    session.on_compaction(create_compact_function(summarizer, **{**SETTINGS, **settings}))
    return session.compact(), summarizer


def test_pin_unpin_and_list(session):
    fill(session, 4)
    pin = session.pin("m1", note="  the budget decision ")
    assert pin["message_id"] == "m1" and pin["note"] == "the budget decision" and pin["pinned_at"]
    again = session.pin("m1", note="changed")
    assert again["note"] == "changed" and again["pinned_at"] == pin["pinned_at"]
    session.pin("m3")
    assert [p["message_id"] for p in session.get_pins()] == ["m1", "m3"]
    assert session.get_history().pinned_ids == {"m1", "m3"}
    assert session.unpin("m1") is True and session.unpin("m1") is False
    assert [p["message_id"] for p in session.get_pins()] == ["m3"]


def test_pin_refuses_what_is_not_a_stored_message(session):
    fill(session, 2)
    with pytest.raises(NotFoundError, match="not a message of this session"):
        session.pin("nope")
    with pytest.raises(InvalidInputError, match="not a summary"):
        session.pin("compaction_1")
    with pytest.raises(InvalidInputError, match="note must be text"):
        session.pin("m0", note=3)
    assert session.get_pins() == []


def test_a_pinned_message_survives_compaction_whole_and_in_order(session):
    fill(session, 30)
    session.pin("m9")
    session.pin("m14")
    plan = plan_compaction(session.get_history(), **SETTINGS)
    assert ids(plan.kept) == ["m9", "m14"]
    assert not {"m9", "m14"} & set(ids(plan.middle))
    assert "m turn 9:" not in plan.prompt and "m turn 10:" in plan.prompt
    assert plan.tokens_after == plan.head_tokens + plan.target_summary_tokens + plan.kept_tokens + plan.tail_tokens
    overlay, summarizer = compact(session)
    assert summarizer.prompts == [plan.prompt]
    history = session.get_history()
    summary_id = f"compaction_{overlay['id']}"
    assert ids(history) == ids(plan.head) + [summary_id, "m9", "m14"] + ids(plan.tail)
    assert history[ids(history).index("m9")] == session.get_message("m9")
    compaction = history[len(plan.head)]["metadata"]["compaction"]
    assert compaction["kept_pinned"] == ["m9", "m14"]
    assert compaction["covered_messages"] == len(plan.middle)


def test_a_slice_of_the_history_keeps_its_pins(session):
    fill(session, 34)
    session.pin("m13")
    history = session.get_history()
    plan = plan_compaction(history[4:], **SETTINGS)
    assert ids(plan.kept) == ["m13"] and "m13" not in ids(plan.middle)
    assert "m turn 13:" not in plan.prompt
    assert plan_compaction(history[4:], **SETTINGS, pinned_ids=()).kept == []  # what a pinless slice would plan
    assert (history[4:] + [history[0]]).pinned_ids == ([history[0]] + history[4:]).pinned_ids == {"m13"}
    assert history.copy().pinned_ids == history[:].pinned_ids == {"m13"}
    assert type(history[0]) is dict


def test_a_pin_at_the_edge_of_the_middle_stays_in_place(session):
    fill(session, 30)
    unpinned = plan_compaction(session.get_history(), **SETTINGS)
    first, last = unpinned.middle[0]["id"], unpinned.middle[-1]["id"]
    session.pin(first)
    session.pin(last)
    plan = plan_compaction(session.get_history(), **SETTINGS)
    assert plan.head[-1]["id"] == first and plan.tail[0]["id"] == last and plan.kept == []
    overlay, _ = compact(session)
    history = ids(session.get_history())
    assert history.index(first) < history.index(f"compaction_{overlay['id']}") < history.index(last)


def test_a_second_compaction_keeps_the_pins_the_first_one_kept(session):
    fill(session, 30)
    session.pin("m8")
    compact(session)
    fill(session, 20, prefix="n")
    overlay, summarizer = compact(session)
    assert "m turn 8:" not in summarizer.prompts[0]
    history = ids(session.get_history())
    assert history[history.index(f"compaction_{overlay['id']}") + 1] == "m8"
    assert history.count("m8") == 1


def test_pinning_after_a_compaction_brings_the_message_back(session):
    fill(session, 30)
    overlay, _ = compact(session)
    assert "m10" not in ids(session.get_history())
    session.pin("m10")
    history = ids(session.get_history())
    assert history[history.index(f"compaction_{overlay['id']}") + 1] == "m10"
    session.unpin("m10")
    assert "m10" not in ids(session.get_history())


def test_a_pinned_tool_call_keeps_its_result_and_the_reverse(session):
    fill(session, 10)
    session.append_message({"id": "call", "role": "assistant", "parts": [
        {"type": "tool-lookup", "toolCallId": "c1", "toolName": "lookup", "state": "input-available",
         "input": {"order": 4471}}]})
    session.append_message({"id": "result", "role": "tool", "parts": [
        {"type": "tool-lookup", "toolCallId": "c1", "toolName": "lookup", "state": "output-available",
         "output": "shipped on 3 May"}]})
    fill(session, 20, prefix="n")
    session.pin("result")
    plan = plan_compaction(session.get_history(), **SETTINGS)
    assert ids(plan.kept) == ["call", "result"]
    compact(session)
    history = session.get_history()
    assert ids(history)[ids(history).index("call") + 1] == "result"
    assert lint_tool_pairs(session) == []


def test_pins_on_another_branch_do_not_show(session):
    fill(session, 20)
    fill_branch = [text_message(f"b{i}", f"branch turn {i} " + "word " * 40, "user" if i % 2 else "assistant")
                   for i in range(10)]
    session.append_message(fill_branch[0], parent_id="m5")
    for message in fill_branch[1:]:
        session.append_message(message)
    session.pin("b3")
    compact(session, protect_head=1)
    assert "b3" not in ids(session.get_history("m19"))
    assert "b3" in ids(session.get_history("b9"))


def test_deleting_a_pinned_message_drops_its_pin_and_clear_drops_all(session):
    fill(session, 6)
    session.pin("m2")
    session.pin("m4")
    session.delete_messages("m2")
    assert [p["message_id"] for p in session.get_pins()] == ["m4"]
    session.clear_messages()
    assert session.get_pins() == []


def test_pins_move_the_session_version_the_lab_caches_on(session):
    fill(session, 4)
    before = session.info["updated_at"]
    time.sleep(0.002)  # stored times count milliseconds
    session.pin("m1")
    pinned = session.info["updated_at"]
    time.sleep(0.002)
    session.unpin("m1")
    assert before < pinned < session.info["updated_at"]


def test_export_and_import_keep_pins(store):
    session = Session.create(store, "pinned")
    fill(session, 6)
    session.pin("m3", note="<b>keep</b> ' OR 1=1 --")
    copy = import_session(store, export_session(session), session_id="pinned-copy")
    assert copy.get_pins() == session.get_pins()
    broken = export_session(session)
    broken["pins"] = [{"message_id": "m3"}, {"message_id": "m3"}]
    with pytest.raises(Exception, match="pinned twice"):
        import_session(store, broken, session_id="broken")
    assert store.sessions.find("default", "default", "broken") is None


def test_the_tree_marks_pins_and_never_hides_them_in_a_run(session):
    fill(session, 40)
    session.pin("m20")
    tree = SessionTree.of(session)
    layout = tree.layout(active_leaf="m39", collapse_over=10)
    assert layout.nodes["m20"].pinned and not layout.nodes["m21"].pinned
    assert "m19" not in layout.nodes  # drawn inside a collapsed run, where a pin never goes
    assert not any("m20" in members for members in layout.runs.values())
    assert tree.history("m39", session.get_compactions()) == session.get_history("m39")


def test_experiment_arms_keep_pins(store):
    session = Session.create(store, "pinned-experiment")
    fill(session, 30)
    session.pin("m7")
    experiments = Experiments(store)
    results = experiments.run({
        "name": "pins", "arms": [
            {"name": "extractive", "strategy": "extractive", "protect_head": 2, "tail_token_budget": 300},
            {"name": "window", "strategy": "window", "max_length": 1500},
        ],
        "cases": [{"name": "c", "session": session.session_id, "probes": [
            {"id": "p", "question": "What was turn 7?", "facts": ["m turn 7:"]}]}],
    })
    for arm in ("extractive", "window"):
        run = results.run(arm, "c")
        context = ids(experiments.context(run))
        assert run["score"] == 1.0 and "m7" in context and "m6" not in context, arm
