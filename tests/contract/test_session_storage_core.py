"""The core ``SessionStorage`` contract, on SQLite, PostgreSQL and ``InMemorySessionStorage``: a Session
over any of them behaves alike. The in-memory storage answers only the core, so every read beyond it
here (child counts, leaves, pins, outlines, paged history) runs through the fallbacks of
``memorylab.store.capabilities``; the last tests check that they give what the SQL capabilities give."""
import pytest

from memorylab import InvalidInputError, InvalidMessageError, NotFoundError, Session, StaleWriteError, lint_tool_pairs
from memorylab.display.treeview import SessionTree
from memorylab.history.compaction import create_compact_function
from memorylab.llm.prompt_cache import prompt_cache_report
from memorylab.store import (
    InMemorySessionStorage,
    Outlines,
    PagedBranchReads,
    Store,
    TreeQueries,
    capabilities,
    protocols,
)
from tests.helpers import ids, text_message

KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), "memory"]


@pytest.fixture(params=KINDS)
def kind(request):
    return request.param


def open_session(kind, request, tmp_path, session_id="s1"):
    """A Session ``session_id`` on storage ``kind`` (a store stays open until the test ends)."""
    if kind == "memory":
        return Session.over(InMemorySessionStorage(session_id))
    target = request.getfixturevalue("postgres_url") if kind == "postgres" else tmp_path / "lab.db"
    store = Store(target)
    request.addfinalizer(store.close)
    return Session.create(store, session_id)


@pytest.fixture
def session(kind, request, tmp_path):
    return open_session(kind, request, tmp_path)


def tool_call(message_id, call_id):
    return {"id": message_id, "role": "assistant", "parts": [
        {"type": "tool-lookup", "toolCallId": call_id, "toolName": "lookup", "input": {"q": "x"},
         "state": "input-available"}]}


def tool_result(message_id, call_id):
    return {"id": message_id, "role": "tool", "parts": [
        {"type": "tool-lookup", "toolCallId": call_id, "toolName": "lookup", "input": {"q": "x"},
         "output": "found", "state": "output-available"}]}


def fill(session):
    """m0 .. m5 on one branch, then b4 forking from m3: two leaves, m5 and b4 (the newest)."""
    for i in range(6):
        role = "user" if i % 2 == 0 else "assistant"
        session.append_message(text_message(f"m{i}", f"message {i} about the ferry", role))
    session.append_message(text_message("b4", "another answer"), parent_id="m3")


def test_in_memory_storage_is_the_core_and_nothing_more():
    storage = InMemorySessionStorage("s1")
    assert not any(capabilities.offers(storage, capability) for capability in (TreeQueries, Outlines, PagedBranchReads))
    core = {name for name in vars(protocols.SessionStorage) if not name.startswith("_")} - {"blocks"}
    assert len(core) < 25
    assert core <= set(dir(storage))


def test_append_branch_and_read(session):
    fill(session)
    assert ids(session.get_history()) == ["m0", "m1", "m2", "m3", "b4"]
    assert ids(session.get_history("m5")) == ["m0", "m1", "m2", "m3", "m4", "m5"]
    assert ids(session.get_history("nope")) == []
    assert session.get_latest_leaf_id() == "b4" and session.get_latest_leaf()["id"] == "b4"
    assert ids(session.get_branches("m3")) == ["m4", "b4"] and ids(session.get_branches(None)) == ["m0"]
    assert ids(session.get_leaves()) == ["b4", "m5"]
    assert session.get_child_counts() == {"m0": 1, "m1": 1, "m2": 1, "m3": 2, "m4": 1}
    assert session.get_leaf_for("m4") == "m5" and session.get_leaf_for("m1") == "b4"
    assert session.get_leaf_for("x") is None
    assert session.get_path_length() == 5 and session.get_path_length("m5") == 6
    assert ids(session.get_all_messages()) == ["m0", "m1", "m2", "m3", "m4", "m5", "b4"]
    assert session.stats()["branches"] == 2 and session.stats()["messages"] == 7


def test_append_is_idempotent_and_refuses_a_parent_it_does_not_hold(session):
    first = session.append_message(text_message("a", "first"))
    assert session.append_message(text_message("a", "second"))["parts"] == first["parts"]
    assert session.get_message("a")["parent_id"] is None and session.storage.count() == 1
    root = session.append_message(text_message("r", "a new root"), parent_id=None)
    assert root["parent_id"] is None and ids(session.get_branches(None)) == ["a", "r"]
    with pytest.raises(NotFoundError):
        session.append_message(text_message("x", "lost"), parent_id="nowhere")


def test_update_delete_and_clear(session):
    fill(session)
    updated = session.update_message({"id": "m1", "role": "assistant", "content": "changed"})
    assert updated["parent_id"] == "m0" and session.get_message("m1")["parts"][0]["text"] == "changed"
    with pytest.raises(NotFoundError):
        session.update_message({"id": "ghost", "role": "user", "content": "x"})
    session.add_compaction("summary", "m1", "m2")
    session.pin("m2")
    assert session.delete_messages(["m2", "unknown"]) == 1
    assert session.get_message("m3")["parent_id"] == "m1"
    assert session.get_compactions() == [] and session.get_pins() == []
    assert ids(session.get_history("m5")) == ["m0", "m1", "m3", "m4", "m5"]
    assert session.clear_messages() == 6 and session.get_history() == [] and session.get_latest_leaf_id() is None


def test_overlays_apply_on_their_branch_and_are_removed(session):
    fill(session)
    overlay = session.add_compaction("the first three", "m0", "m2")
    assert overlay["id"] == 1 and [o["summary"] for o in session.get_compactions()] == ["the first three"]
    history = session.get_history()
    assert ids(history) == ["compaction_1", "m3", "b4"] and history[0]["parts"][0]["text"].endswith("the first three")
    assert list(session.iter_history(page_size=2)) == history
    with pytest.raises(InvalidMessageError):
        session.add_compaction("off the path", "m4", "b4")
    with pytest.raises(NotFoundError):
        session.add_compaction("nothing", "m0", "ghost")
    session.remove_compaction(1)
    assert ids(session.get_history()) == ["m0", "m1", "m2", "m3", "b4"]
    with pytest.raises(NotFoundError):
        session.remove_compaction(1)


def test_pins_survive_a_compaction_and_a_plan_leaves_them_out(session):
    fill(session)
    pin = session.pin("m1", note="keep")
    assert pin["message_id"] == "m1" and pin["note"] == "keep"
    assert session.pin("m1", note="kept")["pinned_at"] == pin["pinned_at"]
    with pytest.raises(NotFoundError):
        session.pin("ghost")
    session.add_compaction("summary", "m0", "m2")
    history = session.get_history("m5")
    assert ids(history) == ["compaction_1", "m1", "m3", "m4", "m5"] and history.pinned_ids == {"m1"}
    assert list(session.iter_history("m5", page_size=1)) == history
    plan = session.plan_compaction("m5", protect_head=0, tail_token_budget=1, min_tail_messages=1)
    assert "m1" not in [m["id"] for m in plan.middle]
    assert session.unpin("m1") and not session.unpin("m1") and session.get_pins() == []


class PlainListStorage(InMemorySessionStorage):
    """A storage of one's own whose ``path`` answers a plain list, as a list of message dicts may."""

    def path(self, leaf_id):
        return list(super().path(leaf_id))


def test_a_storage_answering_plain_lists_still_gets_its_pins_through_the_history():
    session = Session.over(PlainListStorage("s1"))
    fill(session)
    session.pin("m1")
    history = session.get_history("m5", apply_compactions=False)
    assert ids(history) == ["m0", "m1", "m2", "m3", "m4", "m5"] and history.pinned_ids == {"m1"}
    plan = session.plan_compaction("m5", protect_head=0, tail_token_budget=1, min_tail_messages=1)
    assert "m1" not in [m["id"] for m in plan.middle]


def test_compact_writes_one_growing_summary(session):
    fill(session)
    session.on_compaction(create_compact_function(lambda prompt: "summed up", protect_head=1,
                                                  tail_token_budget=1, min_tail_messages=1))
    overlay = session.compact()
    assert overlay["from_id"] == "m1" and ids(session.get_history())[:2] == ["m0", f"compaction_{overlay['id']}"]
    assert session.compaction_status["state"] == "compacted"


def test_search_finds_words_and_any_string_is_safe(session):
    fill(session)
    session.append_message(text_message("q", 'order "A-4471" (shipped) OR NOT'))
    assert ids(session.search("ferr", limit=3)) and all(hit["session_id"] == "s1" for hit in session.search("ferry"))
    assert len(session.search("ferry", limit=2)) == 2
    assert ids(session.search("A-4471")) == ["q"]
    for hostile in ['"', "NOT", "(", "*", "", "ü'\\"]:
        session.search(hostile)


def test_metadata_status_and_blocks(session):
    session.set_metadata({"title": "Trip"})
    assert session.info["metadata"] == {"title": "Trip"} and session.info["session_id"] == "s1"
    storage = session.storage
    storage.set_status("done", "2024-01-01T00:00:00Z", expected=None)
    assert storage.status() == "done"
    with pytest.raises(StaleWriteError):
        storage.set_status("open", "2024-01-02T00:00:00Z", expected=None)
    session.with_context("notes", max_tokens=50).with_frozen_prompt_store()
    block = session.replace_context_block("notes", "likes ferries")
    with pytest.raises(StaleWriteError):
        session.replace_context_block("notes", "x", expected="0" * 16)
    session.replace_context_block("notes", "likes boats", expected=block["version"])
    session.append_context_block("notes", "and trains")
    assert session.get_context_block("notes")["content"] == "likes boats\nand trains"
    frozen = session.freeze_system_prompt()
    session.replace_context_block("notes", "changed")
    assert session.freeze_system_prompt() == frozen and "likes boats" in frozen


def test_tool_pairs_tree_and_prompt_cache_read_through_the_fallbacks(session):
    session.append_message(text_message("u", "look it up"))
    session.append_message(tool_call("c1", "call-1"))
    session.append_message(text_message("a", "no result came back", "assistant"))
    findings = lint_tool_pairs(session)
    assert [finding.tool_call_id for finding in findings] == ["call-1"]
    assert len(SessionTree.of(session)) == 3
    assert len(prompt_cache_report(session).rows) == 2  # the assistant turns c1 and a


def test_a_storage_without_a_store_has_no_key(kind, session):
    if kind == "memory":
        with pytest.raises(InvalidInputError, match="no store key"):
            session.pk
    else:
        assert isinstance(session.pk, int)


# -- the fallbacks compute what the SQL capabilities answer ----------------------------------------


def written_alike(session):
    """The same conversation, with fixed times, in any storage: branches, a tool pair, an overlay, a pin."""
    at = "2024-05-01T10:00:{:02d}.000Z"
    messages = [text_message("m0", "hello"), tool_call("m1", "call-1"), tool_result("m2", "call-1"),
                text_message("m3", "an answer", "assistant"), text_message("m4", "")]
    for i, message in enumerate(messages):
        session.append_message({**message, "created_at": at.format(i), "metadata": {"n": i}})
    session.append_message({**text_message("b3", "a fork", "assistant"), "created_at": at.format(9)}, parent_id="m2")
    session.add_compaction("summary", "m0", "m1")
    session.pin("m0")


def timeless(history):
    """``history`` with its summaries' times left out: each storage stamps its overlay when it is written."""
    return [{k: v for k, v in m.items() if k != "created_at"} if m["id"].startswith("compaction_") else m
            for m in history]


@pytest.mark.parametrize("backend_kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_every_fallback_gives_what_the_sql_storage_gives(backend_kind, request, tmp_path):
    stored = open_session(backend_kind, request, tmp_path)
    memory = Session.over(InMemorySessionStorage("s1"))
    for session in (stored, memory):
        written_alike(session)
    sql, core = stored.storage, memory.storage
    assert capabilities.offers(sql, TreeQueries) and capabilities.offers(sql, Outlines)
    assert capabilities.offers(sql, PagedBranchReads)
    for read in (capabilities.message_ids, capabilities.child_counts, capabilities.pinned_ids,
                 capabilities.outline, capabilities.has_tool_parts):
        assert read(core) == read(sql), read.__name__
    assert ids(capabilities.leaves(core)) == ids(capabilities.leaves(sql))
    assert list(capabilities.tool_outline(core)) == list(capabilities.tool_outline(sql))
    assert [ids(page) for page in capabilities.message_pages(core, 2)] == \
        [ids(page) for page in capabilities.message_pages(sql, 2)]
    for leaf in ("m4", "b3", "ghost"):
        assert capabilities.path_stats(core, leaf) == capabilities.path_stats(sql, leaf)
        assert capabilities.assistant_turns(core, leaf) == capabilities.assistant_turns(sql, leaf)
        assert timeless(memory.iter_history(leaf)) == timeless(stored.iter_history(leaf)) == \
            timeless(memory.get_history(leaf))
    for message_id in ("m0", "m2", "b3", "ghost"):
        assert capabilities.newest_leaf_under(core, message_id) == capabilities.newest_leaf_under(sql, message_id)
