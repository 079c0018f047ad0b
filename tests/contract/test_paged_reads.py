"""Reading a long session a page at a time gives what the whole-list reads give, on both backends:
``iter_history`` is ``get_history``, ``write_export`` writes ``export_session``, ``Session.plan_compaction``
is ``plan_compaction(get_history())``, and the text-less outline lints as the full one, on every shape
of tree: branches, nested and superseded overlays, pins with their tool partners, a stale stretch flag
and a damaged row."""
import io
import json
import warnings

import pytest

from memorylab import InvalidInputError, Session, load_samples, plan_compaction
from memorylab.cli import main
from memorylab.errors import DamagedRowWarning
from memorylab.history import paged
from memorylab.history.tool_pairs import lint_tool_pairs, lint_tree
from memorylab.io import export_session, write_export
from memorylab.messages import is_tool_part
from tests.helpers import ids, text_message

PAGE_SIZES = (1, 2, 3, 1000)


def call(message_id, call_id):
    return {"id": message_id, "role": "assistant", "parts": [
        {"type": "text", "text": f"looking up {call_id}"},
        {"type": "tool-read", "toolCallId": call_id, "toolName": "read", "input": {"path": call_id},
         "state": "input-available"}]}


def result(message_id, call_id):
    return {"id": message_id, "role": "tool", "parts": [
        {"type": "tool-read", "toolCallId": call_id, "toolName": "read", "output": f"text of {call_id} " * 30,
         "state": "output-available"}]}


def conversation(session, prefix, count, parent=None):
    """``count`` messages under ``parent`` (None: the newest), every fifth pair a tool call and its result."""
    for i in range(count):
        message_id = f"{prefix}{i}"
        if i % 5 == 3:
            message = call(message_id, f"{prefix}call{i}")
        elif i % 5 == 4:
            message = result(message_id, f"{prefix}call{i - 1}")
        else:
            message = text_message(message_id, f"{prefix} turn {i}: " + "detail " * (i % 7),
                                   "user" if i % 2 == 0 else "assistant")
        session.append_message(message, **({"parent_id": parent} if parent and i == 0 else {}))


@pytest.fixture
def tree(session):
    """m0..m39 with a branch b0..b9 under m12 and c0..c4 under m30; overlays nested (m2..m20 inside
    m2..m25), superseded (two from m5) and on the branch; pins on a call, a result and a plain message."""
    conversation(session, "m", 40)
    conversation(session, "b", 10, parent="m12")
    conversation(session, "c", 5, parent="m30")
    for start, end in (("m2", "m20"), ("m5", "m9"), ("m5", "m15"), ("m2", "m25"), ("m28", "m33"), ("b2", "b6"),
                       ("m26", "c3")):
        session.add_compaction(f"summary of {start}..{end}", start, end)
    for pinned in ("m8", "m14", "m22", "b4", "m31"):
        session.pin(pinned)
    return session


LEAVES = ("m39", "b9", "c4", "m20", "m5", "m0", "nowhere")


def assert_reads_alike(session, leaf_id=None):
    whole = session.get_history(leaf_id)
    for page_size in PAGE_SIZES:
        assert list(session.iter_history(leaf_id, page_size=page_size)) == whole


def test_iter_history_is_get_history_on_every_branch(tree):
    for leaf_id in LEAVES:
        assert_reads_alike(tree, leaf_id)


def test_iter_history_reads_the_latest_branch_by_default_and_nothing_of_an_empty_session(tree, store):
    assert_reads_alike(tree)
    assert list(Session.create(store, "empty").iter_history()) == []


def test_a_summary_keeps_the_pinned_message_and_its_tool_partner_after_it(tree):
    history = list(tree.iter_history("m39", page_size=2))
    summary = next(m for m in history
                   if m["id"].startswith("compaction_") and "kept_pinned" in m["metadata"]["compaction"])
    assert set(summary["metadata"]["compaction"]["kept_pinned"]) >= {"m8", "m9"}  # m8 calls, m9 answers it


def test_a_stale_stretch_flag_is_read_by_walking_the_parent_links(tree, store):
    with store.transaction() as conn:
        conn.execute("UPDATE messages SET continues = 1 WHERE session_pk = ? AND id IN ('b0', 'c0')", (tree.pk,))
    assert tree.storage.branch_ranges("b9") is None
    for leaf_id in LEAVES:
        assert_reads_alike(tree, leaf_id)


@pytest.mark.parametrize("damaged_id", ["m17", "m25", "m8", "m33"])
def test_a_damaged_row_is_left_out_with_a_warning_as_get_history_does(tree, store, damaged_id):
    """m17 lies inside an overlay, m25 ends one (which then no longer applies), m8 is a pinned call and
    m33 ends the overlay that the branch under m30 does not reach."""
    leaves = [leaf for leaf in LEAVES[:3] if damaged_id in ids(tree.get_history(leaf, apply_compactions=False))]
    with store.transaction() as conn:
        conn.execute("UPDATE messages SET parts = '[{\"ty' WHERE session_pk = ? AND id = ?", (tree.pk, damaged_id))
    for leaf_id in leaves:
        with pytest.warns(DamagedRowWarning, match=damaged_id):
            whole = tree.get_history(leaf_id)
        with pytest.warns(DamagedRowWarning, match=damaged_id):
            assert list(tree.iter_history(leaf_id, page_size=3)) == whole
        with pytest.warns(DamagedRowWarning):  # the stored middle reads the store again when compared
            assert_same_plan(tree.plan_compaction(leaf_id, protect_head=2, tail_token_budget=150),
                             plan_compaction(whole, protect_head=2, tail_token_budget=150))


def test_the_export_written_a_page_at_a_time_is_export_session(store, tmp_path):
    load_samples(store)
    for row in store.sessions.list():
        session = Session.open(store, row["session_id"], tenant_id=row["tenant_id"], agent_id=row["agent_id"])
        write_export(session, tmp_path / "export.json", page_size=3)
        assert json.loads((tmp_path / "export.json").read_text(encoding="utf-8")) == export_session(session)


@pytest.mark.parametrize("page_size", [1, 1000])
def test_an_export_of_any_shape_reads_back_as_export_session(tree, store, tmp_path, page_size):
    tree.set_metadata({"title": "naïve \"quoted\"\nline", "nested": {"messages": []}})
    empty = Session.create(store, "empty")
    for session in (tree, empty):
        written = io.StringIO()
        write_export(session, written, page_size=page_size)
        assert json.loads(written.getvalue()) == export_session(session)


def test_memorylab_export_streams_the_same_document(tree, store_target, tmp_path, capsys):
    assert main(["--db", str(store_target), "export", tree.session_id, "-o", str(tmp_path / "cli.json")]) == 0
    assert json.loads((tmp_path / "cli.json").read_text(encoding="utf-8")) == export_session(tree)
    capsys.readouterr()
    assert main(["--db", str(store_target), "export", tree.session_id]) == 0
    assert json.loads(capsys.readouterr().out) == export_session(tree)


PLAN_SETTINGS = [
    {},
    {"protect_head": 2, "tail_token_budget": 150},
    {"protect_head": 0, "tail_token_budget": 1, "min_tail_messages": 1},
    {"protect_head": 8, "tail_token_budget": 400, "min_tail_messages": 5,
     "prompt_template": "{previous_summary}<<{transcript}>> in {target_tokens}"},
    {"protect_head": 2, "tail_token_budget": 150, "pinned_ids": ["m27", "b7"]},
]


@pytest.mark.parametrize("settings", PLAN_SETTINGS)
def test_a_plan_from_the_store_is_the_plan_of_the_history(tree, settings, monkeypatch):
    monkeypatch.setattr(paged, "TRANSCRIPT_PAGE", 2)  # calls and their results meet page boundaries
    for leaf_id in ("m39", "b9", "c4", "m20"):
        assert_same_plan(tree.plan_compaction(leaf_id, page_size=3, **settings),
                         plan_compaction(tree.get_history(leaf_id), **settings))


def assert_same_plan(stored, whole):
    assert (stored is None) == (whole is None)
    if whole is not None:
        assert stored.to_dict() == whole.to_dict()
        assert (stored.head, stored.kept, stored.tail) == (whole.head, whole.kept, whole.tail)
        assert list(stored.middle) == whole.middle and len(stored.middle) == len(whole.middle)
        assert (stored.middle[0], stored.middle[-1], stored.middle[1:3]) == (whole.middle[0], whole.middle[-1],
                                                                             whole.middle[1:3])


def test_nothing_to_plan_is_none_from_the_store_too(store):
    session = Session.create(store, "short")
    conversation(session, "s", 3)
    assert session.plan_compaction() is None and plan_compaction(session.get_history()) is None
    assert Session.create(store, "empty").plan_compaction() is None


def test_a_token_counter_plans_from_the_whole_history(tree):
    def counter(context):
        return 10 * len(context)

    stored = tree.plan_compaction("m39", token_counter=counter, tail_token_budget=50)
    assert stored is not None
    assert_same_plan(stored, plan_compaction(tree.get_history("m39"), token_counter=counter, tail_token_budget=50))


def test_the_tool_outline_lints_as_the_whole_one(tree, store):
    tree.append_message(result("orphan", "never-called"), parent_id="m36")
    with_text, tool_outline = tree.storage.outline(), list(tree.storage.tool_outline())
    assert [row[:3] for row in tool_outline] == [(m["id"], m["parent_id"], m["role"]) for m in with_text]
    text_only = [parts for _, _, _, parts in tool_outline if not any(is_tool_part(part) for part in parts)]
    assert text_only and all(part == {"type": "text"} for parts in text_only for part in parts)
    findings = lint_tool_pairs(tree)
    assert findings and findings == lint_tree(with_text, tree.get_compactions(), tree.storage.pinned_ids())


def test_page_size_must_be_a_positive_integer(tree):
    with pytest.raises(InvalidInputError, match="page_size"):
        tree.iter_history(page_size=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ids(tree.iter_history("m3")) == ids(tree.get_history("m3"))


def test_check_lints_only_the_sessions_with_a_tool_part_reading_them_a_batch_at_a_time(store):
    for number in range(5):
        session = Session.create(store, f"t{number}")
        session.append_message(text_message(f"u{number}", "hello"))
        if number % 2 == 0:
            session.append_message(result(f"r{number}", f"call-{number}"))
    found = list(store.integrity.sessions_with_tool_parts(batch=2))
    assert [row["session_id"] for row in found] == ["t0", "t2", "t4"]
    assert [row["pk"] for row in found] == sorted(row["pk"] for row in found)
