"""Properties that must hold for any input hypothesis can think of.

Run with ``--hypothesis-show-statistics`` to see how many examples each property ran.
"""
import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memorylab import (
    InvalidMessageError,
    KVStore,
    Memory,
    Session,
    SqliteSearchProvider,
    Store,
    export_session,
    import_session,
    parse_export,
    truncate_older_messages,
)
from memorylab.history.overlays import SUMMARY_ID_PREFIX
from tests.helpers import examples, text_message

# Text that ids, keys and labels accept: no control characters (hypothesis' text has no surrogates).
plain_text = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=20).filter(str.strip)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
# How each message joins the tree: under the newest leaf (the default), under an earlier message
# (picked by the number), or as a new root.
placements = st.lists(
    st.tuples(st.sampled_from(["latest", "latest", "fork", "root"]), st.integers(min_value=0, max_value=10**6)),
    min_size=1, max_size=25,
)


def grow_tree(session, steps, text=lambda i: f"message {i}"):
    """Append one message per step; returns {id: parent id} as the model of what was stored."""
    parents = {}
    for i, (how, pick) in enumerate(steps):
        ids = list(parents)
        message = text_message(f"m{i}", text(i), "user" if i % 2 else "assistant")
        if how == "latest" or not ids:
            parents[f"m{i}"] = ids[-1] if ids else None
            session.append_message(message)
        else:
            parents[f"m{i}"] = ids[pick % len(ids)] if how == "fork" else None
            session.append_message(message, parent_id=parents[f"m{i}"])
    return parents


def root_path(parents, leaf):
    path = []
    while leaf is not None:
        path.append(leaf)
        leaf = parents[leaf]
    return path[::-1]


def new_session():
    return Session.create(Store(":memory:"), "s")


@settings(max_examples=examples(300), deadline=None)
@given(placements)
def test_history_is_the_root_to_leaf_path_of_parent_links(steps):
    session = new_session()
    parents = grow_tree(session, steps)
    for leaf in parents:
        history = session.get_history(leaf)
        assert [m["id"] for m in history] == root_path(parents, leaf)
        assert history[0]["parent_id"] is None
        assert all(child["parent_id"] == parent["id"] for parent, child in zip(history, history[1:]))
    newest = list(parents)[-1]
    assert session.get_latest_leaf()["id"] == newest
    assert [m["id"] for m in session.get_history()] == root_path(parents, newest)
    for message_id in parents:
        assert [m["id"] for m in session.get_branches(message_id)] == [c for c, p in parents.items() if p == message_id]
    assert session.get_history("no-such-leaf") == []


def expected_overlaid(path, overlays):
    """The spec: overlays with both ends on the path apply; the newest starting at a message wins."""
    position = {message_id: i for i, message_id in enumerate(path)}
    winner = {}
    for overlay in overlays:
        start, end = position.get(overlay["from_id"]), position.get(overlay["to_id"])
        if start is not None and end is not None:
            winner[start] = overlay
    shown, i = [], 0
    while i < len(path):
        if i in winner:
            shown.append(f"{SUMMARY_ID_PREFIX}{winner[i]['id']}")
            i = position[winner[i]["to_id"]] + 1
        else:
            shown.append(path[i])
            i += 1
    return shown


@settings(max_examples=examples(300), deadline=None)
@given(placements, st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.booleans()), max_size=8))
def test_only_overlays_with_both_ends_on_the_path_apply_and_the_newest_wins(steps, overlay_specs):
    session = new_session()
    parents = grow_tree(session, steps)
    ids = list(parents)
    for to_pick, from_pick, on_path in overlay_specs:
        to_id = ids[to_pick % len(ids)]
        ancestors = root_path(parents, to_id)
        from_id = ancestors[from_pick % len(ancestors)] if on_path else ids[from_pick % len(ids)]
        if from_id in ancestors:
            session.add_compaction(f"summary of {from_id}..{to_id}", from_id, to_id)
        else:
            with pytest.raises(InvalidMessageError, match="not on the path"):
                session.add_compaction("a range across branches", from_id, to_id)
    overlays = session.get_compactions()
    for leaf in ids:
        assert [m["id"] for m in session.get_history(leaf)] == expected_overlaid(root_path(parents, leaf), overlays)


tool_outputs = json_values | st.text(max_size=400)
message_parts = st.lists(
    st.builds(lambda text: {"type": "text", "text": text}, st.text(max_size=400))
    | st.builds(lambda call, output, tool_input: {"type": "tool-search", "toolCallId": call, "toolName": "search",
                                                   "input": tool_input, "output": output, "state": "output-available"},
                st.text("abc", min_size=1, max_size=3), tool_outputs, json_values),
    max_size=3,
)
messages = st.lists(st.builds(lambda role, parts: {"id": "x", "role": role, "parts": parts},
                              st.sampled_from(["user", "assistant"]), message_parts), max_size=8)


def json_size(value):
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


@settings(max_examples=examples(500), deadline=None)
@given(messages, st.integers(0, 6), st.integers(0, 300), st.integers(0, 300))
def test_truncation_never_mutates_its_input_and_never_grows_a_message(history, keep_recent, tool_chars, text_chars):
    original = copy.deepcopy(history)
    cut = truncate_older_messages(history, keep_recent=keep_recent, max_tool_output_chars=tool_chars,
                                  max_text_chars=text_chars)
    assert history == original
    assert len(cut) == len(history)
    for before, after in zip(history, cut):
        assert json_size(after) <= json_size(before)
        assert (after is before) == (after == before)
        for old_part, new_part in zip(before["parts"], after["parts"]):
            assert json_size(new_part) <= json_size(old_part)
    recent = max(len(history) - keep_recent, 0)
    assert all(after is before for before, after in zip(history[recent:], cut[recent:]))


@pytest.fixture(scope="module")
def searchable():
    """One store for every search example: messages, a memory and keyed entries to search through."""
    store = Store(":memory:")
    session = Session.create(store, "searched")
    for i, text in enumerate(["the quick brown fox", "NEAR(a b) OR \"quoted\" text:column", "日本語のテキスト",
                              "émigré café naïve", "a*b^c -d +e (f) {g} [h]"]):
        session.append_message(text_message(f"m{i}", text))
    Memory(store, agent_id="sdr").append("user", "a memory about pricing", key="email:a@b.co")
    entries = SqliteSearchProvider(store)
    entries.set("refunds", "refunds take five days")
    return store, session, entries


# st.text() never holds a lone surrogate; a string from a broken client or from JSON escapes can.
any_text = st.text() | st.text(st.characters() | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF,
                                                                blacklist_categories=()))


@settings(max_examples=examples(1000), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(any_text)
def test_search_never_raises_on_any_text(searchable, query):
    store, session, entries = searchable
    for hits in (store.search(query, tenant_id="default"), session.search(query),
                 Memory(store, agent_id="sdr").search(query, key="email:a@b.co")):
        assert isinstance(hits, list)
        assert all(set(hit) >= {"id", "role", "content", "created_at", "session_id"} for hit in hits)
    assert isinstance(entries.search(query), str)


@settings(max_examples=examples(200), deadline=None)
@given(placements, st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), max_size=4),
       st.dictionaries(plain_text, json_values, max_size=3), st.lists(st.text(max_size=50), max_size=25),
       st.dictionaries(st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,15}", fullmatch=True), st.text(max_size=50),
                       max_size=3))
def test_export_then_import_is_the_identity(steps, overlay_specs, metadata, texts, blocks):
    session = new_session()
    session.set_metadata(metadata)
    parents = grow_tree(session, steps, text=lambda i: texts[i] if i < len(texts) else "")
    ids = list(parents)
    for to_pick, from_pick in overlay_specs:
        ancestors = root_path(parents, ids[to_pick % len(ids)])
        session.add_compaction("a summary", ancestors[from_pick % len(ancestors)], ancestors[-1])
    for label, content in blocks.items():
        session.with_context(label).replace_context_block(label, content)
    exported = export_session(session)
    copy_store = Store(":memory:")
    imported = import_session(copy_store, parse_export(json.dumps(exported, ensure_ascii=False)))
    assert export_session(imported) == exported
    assert imported.get_history() == session.get_history()
    renamed = import_session(copy_store, exported, session_id="renamed")
    assert export_session(renamed)["messages"] == exported["messages"]


kv_keys = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=40)


@settings(max_examples=examples(500), deadline=None)
@given(kv_keys, json_values)
def test_kv_returns_any_json_value_exactly(key, value):
    kv = KVStore(Store(":memory:"), tenant_id="t", namespace="n")
    kv.set(key, value)
    # json.dumps tells True from 1 and 1 from 1.0, which == does not
    assert json.dumps(kv.get(key)) == json.dumps(value)
    assert json.dumps(kv.get_all("*")) == json.dumps({key: value})
    assert kv.keys("*") == [key] and kv.has(key)
