import time

import pytest

from memorylab import InvalidInputError, NotFoundError, Session, Store
from tests.helpers import ids, text_message


def test_linear_append_chains_to_the_latest_leaf(session):
    for i in range(5):
        session.append_message(text_message(f"m{i}", f"turn {i}", "user" if i % 2 == 0 else "assistant"))
    history = session.get_history()
    assert ids(history) == ["m0", "m1", "m2", "m3", "m4"]
    assert [m["parent_id"] for m in history] == [None, "m0", "m1", "m2", "m3"]
    assert session.get_latest_leaf()["id"] == "m4"
    assert session.get_path_length() == 5


def test_explicit_parent_creates_a_branch_and_latest_leaf_follows_it(session):
    for i in range(3):
        session.append_message(text_message(f"m{i}", f"turn {i}"))
    session.append_message(text_message("alt", "regenerated", "assistant"), parent_id="m1")
    assert ids(session.get_branches("m1")) == ["m2", "alt"]
    assert ids(session.get_history()) == ["m0", "m1", "alt"]
    assert ids(session.get_history("m2")) == ["m0", "m1", "m2"]
    assert {m["id"] for m in session.get_leaves()} == {"m2", "alt"}
    # omitted parent continues the newest leaf, which is now the branch
    session.append_message(text_message("next", "continues the branch"))
    assert ids(session.get_history()) == ["m0", "m1", "alt", "next"]
    assert session.get_path_length("m2") == 3


def test_none_parent_starts_a_new_root(session):
    session.append_message(text_message("a", "first"))
    session.append_message(text_message("b", "second root"), parent_id=None)
    assert session.get_message("b")["parent_id"] is None
    assert ids(session.get_history()) == ["b"]
    assert ids(session.get_history("a")) == ["a"]


def test_duplicate_id_is_a_noop_and_first_content_wins(session):
    first = session.append_message(text_message("m1", "original"))
    again = session.append_message(text_message("m1", "changed"), parent_id=None)
    assert again["parts"] == first["parts"]
    assert session.get_message("m1")["parts"][0]["text"] == "original"
    assert session.stats()["messages"] == 1


def test_unknown_parent_and_parent_from_another_session_are_errors(store, session):
    other = Session.create(store, "other")
    other.append_message(text_message("foreign", "elsewhere"))
    with pytest.raises(NotFoundError, match="not a message of this session"):
        session.append_message(text_message("x", "orphan"), parent_id="missing")
    with pytest.raises(NotFoundError):
        session.append_message(text_message("y", "cross"), parent_id="foreign")
    assert session.stats()["messages"] == 0


def test_same_message_id_in_two_sessions_is_allowed(store):
    a, b = Session.create(store, "a"), Session.create(store, "b")
    a.append_message(text_message("m1", "in a"))
    b.append_message(text_message("m1", "in b"))
    assert a.get_message("m1")["parts"][0]["text"] == "in a"
    assert b.get_message("m1")["parts"][0]["text"] == "in b"


def test_unknown_leaf_reads_empty(session):
    session.append_message(text_message("m1", "x"))
    assert session.get_history("nope") == []
    assert session.get_path_length("nope") == 0
    assert Session.create(session.store, "empty").get_history() == []


def test_update_message_keeps_tree_place_and_reindexes(session):
    session.append_message(text_message("m1", "alpha"))
    session.append_message(text_message("m2", "bravo"))
    before = session.info["updated_at"]
    time.sleep(0.002)
    updated = session.update_message(text_message("m2", "charlie", "assistant"))
    assert updated["parent_id"] == "m1"
    assert session.info["updated_at"] > before  # what pages cached of the branch is stale now
    assert session.get_message("m2")["role"] == "assistant"
    assert session.search("bravo") == []
    assert ids(session.search("charlie")) == ["m2"]
    with pytest.raises(NotFoundError):
        session.update_message(text_message("zzz", "missing"))


def test_delete_reattaches_children_and_drops_dead_overlays(session):
    for i in range(4):
        session.append_message(text_message(f"m{i}", f"turn {i}"))
    session.add_compaction("sum", "m1", "m2")
    assert session.delete_messages(["m1", "does-not-exist"]) == 1
    assert ids(session.get_history()) == ["m0", "m2", "m3"]
    assert session.get_compactions() == []
    assert session.search("turn 1") == []


def test_clear_messages_removes_messages_and_overlays(session):
    session.append_message(text_message("m1", "x"))
    session.append_message(text_message("m2", "y"))
    session.add_compaction("s", "m1", "m2")
    assert session.clear_messages() == 2
    assert session.get_history() == [] and session.get_compactions() == []
    assert session.search("x") == []


def test_openai_tool_result_gets_its_name_from_the_parent_call(session):
    session.append_message({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_7", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]})
    result = session.append_message({"role": "tool", "tool_call_id": "call_7", "content": "42"})
    assert result["parts"][0]["toolName"] == "lookup"
    assert result["parts"][0]["type"] == "tool-lookup"


def test_persistence_across_reopen(store_target):
    with Store(store_target) as store:
        s = Session.create(store, "keep", agent_id="bot")
        s.append_message(text_message("m1", "remember the order A-4471"))
        s.append_message(text_message("m2", "noted", "assistant"))
        s.add_compaction("the order is A-4471", "m1", "m2")
    with Store(store_target) as store:
        s = Session.open(store, "keep", agent_id="bot")
        assert ids(s.get_history(apply_compactions=False)) == ["m1", "m2"]
        assert s.get_history()[0]["parts"][0]["text"] == "the order is A-4471"
        assert ids(s.search("A-4471")) == ["m1"]
        with pytest.raises(NotFoundError):
            Session.open(store, "keep", agent_id="someone-else")


def test_large_message_round_trips_intact(session):
    big = "".join(chr(0x41 + i % 26) for i in range(200_000))
    stored = session.append_message(text_message("big", big))
    assert stored["tokens"] == 4 + 50_000
    assert session.get_message("big")["parts"][0]["text"] == big


@pytest.mark.parametrize("bad", ["", "   ", "x" * 201, "a\nb"])
def test_hostile_session_ids_are_refused(store, bad):
    with pytest.raises(InvalidInputError):
        Session.create(store, bad)


def test_sql_metacharacters_in_ids_are_plain_data(store):
    nasty = "s'; DROP TABLE messages; --"
    s = Session.create(store, nasty, agent_id='a"b')
    s.append_message(text_message("id'); --", "still here"))
    assert Session.open(store, nasty, agent_id='a"b').get_history()[0]["id"] == "id'); --"
    assert store.sessions.list()[0]["session_id"] == nasty
