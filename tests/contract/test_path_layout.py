"""Branches laid out in stretches: a message written under the newest message of its session is
flagged as continuing it, a read takes one range of seq per stretch instead of one parent link per
message, and where the flags do not link up (changed behind the engine's back) the read walks the
parent links and `memorylab check` says so."""
import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from memorylab import Session, Store, export_session, import_session
from memorylab.check import WARNING, check_database
from memorylab.store.schema import TABLES
from tests.helpers import examples, ids, text_message

WALK = "path(seq, parent_id, depth)"
"""What only the read that follows parent links one at a time runs."""


def continuing(store, session):
    """The ids of the session's messages flagged as continuing the message stored before them."""
    return {row[0] for row in store.fetch_all("SELECT id FROM messages WHERE session_pk = ? AND continues = 1",
                                         (session.pk,))}


def grow(session, placements):
    """Append ``(id, parent)`` pairs in order; ``parent`` "latest" appends under the newest message."""
    for message_id, parent in placements:
        message = text_message(message_id, f"words of {message_id}")
        if parent == "latest":
            session.append_message(message)
        else:
            session.append_message(message, parent_id=parent)


BRANCHED = [("m1", None), ("m2", "latest"), ("m3", "latest"), ("m4", "latest"), ("b1", "m2"), ("b2", "latest"),
            ("c1", "m4"), ("c2", "c1"), ("r1", None)]
"""m1-m2-m3-m4-c1-c2 (c1 under a leaf named explicitly, c2 under the newest one named), a branch
m2-b1-b2, and a second root r1."""
CONTINUING = {"m2", "m3", "m4", "b2", "c2"}


def test_a_message_under_the_newest_continues_it_and_any_other_starts_a_stretch(session):
    grow(session, BRANCHED)
    assert continuing(session.store, session) == CONTINUING
    assert ids(session.get_history("c2")) == ["m1", "m2", "m3", "m4", "c1", "c2"]
    assert ids(session.get_history("b2")) == ["m1", "m2", "b1", "b2"]
    assert ids(session.get_history("m3")) == ["m1", "m2", "m3"]
    assert ids(session.get_history("r1")) == ["r1"]
    assert session.storage.path_stats("b2") == (4, sum(m["tokens"] for m in session.get_history("b2")))
    assert session.store.integrity.messages_off_their_stretch() == []


def test_other_sessions_written_in_between_do_not_join_a_stretch(store):
    first, second = Session.create(store, "first"), Session.create(store, "second")
    for i in range(6):
        (first if i % 2 else second).append_message(text_message(f"{i % 2}-{i}", f"turn {i}"))
    assert ids(first.get_history()) == ["1-1", "1-3", "1-5"]
    assert ids(second.get_history()) == ["0-0", "0-2", "0-4"]
    assert continuing(store, first) == {"1-3", "1-5"}


def test_an_imported_export_is_laid_out_as_the_original(store):
    original = Session.create(store, "original")
    grow(original, BRANCHED)
    copy = import_session(store, export_session(original), session_id="copy")
    assert continuing(store, copy) == continuing(store, original) == CONTINUING
    assert ids(copy.get_history("b2")) == ["m1", "m2", "b1", "b2"]


def test_importers_flag_what_continues_the_message_written_before_it(store):
    session = Session.create(store, "s1")
    grow(session, [("m1", None), ("m2", "latest")])
    written = [{**text_message(message_id, "imported"), "parent_id": parent, "tokens": 3, "metadata": {},
                "created_at": "2026-01-01T00:00:00.000Z"}
               for message_id, parent in (("m3", "m2"), ("m4", "m3"), ("x1", "m1"), ("x2", "m3"))]
    store.sessions.insert_messages([(session.pk, message) for message in written])
    assert continuing(store, session) == {"m2", "m4"}  # a batch starts a stretch: one hop more, never a wrong one
    assert ids(session.get_history("m4")) == ["m1", "m2", "m3", "m4"]
    assert ids(session.get_history("x2")) == ["m1", "m2", "m3", "x2"]
    assert store.integrity.messages_off_their_stretch() == []


def test_deleting_a_message_leaves_its_children_starting_stretches(session):
    grow(session, BRANCHED)
    session.delete_messages(["m3", "b1"])
    assert continuing(session.store, session) == {"m2", "c2"}
    assert ids(session.get_history("c2")) == ["m1", "m2", "m4", "c1", "c2"]
    assert ids(session.get_history("b2")) == ["m1", "m2", "b2"]
    assert session.store.integrity.messages_off_their_stretch() == []
    session.clear_messages()
    session.append_message(text_message("m1", "again"))
    assert continuing(session.store, session) == set()


def test_flags_changed_behind_the_engines_back_still_read_right_and_are_reported(store):
    session = Session.create(store, "s1")
    grow(session, BRANCHED)
    expected = {leaf: ids(session.get_history(leaf)) for leaf in ("c2", "b2", "r1")}
    stats = session.storage.path_stats("c2")
    with store.transaction() as conn:
        conn.execute("UPDATE messages SET continues = 1 WHERE id IN ('b1', 'c1', 'r1')")
    assert {leaf: ids(session.get_history(leaf)) for leaf in expected} == expected
    assert session.storage.path_stats("c2") == stats
    [finding] = check_database(store).findings
    assert (finding.check, finding.severity) == ("branch layout", WARNING)
    assert "3 messages are flagged" in finding.message and "lay_out_branches()" in finding.message
    store.sessions.lay_out_branches()
    assert check_database(store).ok
    assert continuing(store, session) == CONTINUING


def test_a_branch_is_read_by_its_stretches_and_walked_only_when_they_do_not_link_up(db_path):
    with Store(db_path) as store:
        session = Session.create(store, "s1")
        grow(session, [(f"m{i}", "latest") for i in range(60)] + [("b1", "m30"), ("b2", "latest")])
        statements = []
        store._conn.set_trace_callback(statements.append)
        assert len(session.get_history("b2")) == 33 and len(session.get_history("m59")) == 60
        assert session.get_path_length("b2") == 33
        assert not any(WALK in sql for sql in statements)
        with store.transaction() as conn:
            conn.execute("UPDATE messages SET parent_id = 'm28' WHERE id = 'm30'")  # m29 leaves the branch
        assert ids(session.get_history("b2"))[28:] == ["m28", "m30", "b1", "b2"]
        assert any(WALK in sql for sql in statements)


CREATED_AFTER_M006 = {"experiments", "experiment_arms", "experiment_cases", "experiment_probes", "experiment_runs",
                      "message_pins", "quarantine", "experiment_labels", "experiment_grades"}
"""The tables of migrations m008 and later (m007 only adds a column and an index to messages)."""


def test_opening_a_file_of_the_previous_schema_lays_out_its_branches(tmp_path):
    path = tmp_path / "old.db"
    with Store(path) as store:
        session = Session.create(store, "s1")
        grow(session, BRANCHED)
    with sqlite3.connect(path) as conn:  # back to the schema before stretches: no flags, no later tables
        conn.execute("DROP INDEX messages_stretch")
        conn.execute("ALTER TABLE messages DROP COLUMN continues")
        for table in reversed(TABLES):
            if table.name in CREATED_AFTER_M006:
                conn.execute(f"DROP TABLE {table.name}")
        conn.execute("PRAGMA user_version = 6")
    with Store(path) as store:
        assert continuing(store, session) == CONTINUING
        assert ids(Session.open(store, "s1").get_history("c2")) == ["m1", "m2", "m3", "m4", "c1", "c2"]


steps = st.lists(st.tuples(st.sampled_from(["latest", "latest", "fork", "root", "delete", "other session"]),
                           st.integers(min_value=0, max_value=10**6)), min_size=1, max_size=30)


@settings(max_examples=examples(200), deadline=None)
@given(steps)
def test_every_branch_reads_as_its_parent_links_say_whatever_the_writes(steps):
    store = Store(":memory:")
    session, other = Session.create(store, "s"), Session.create(store, "other")
    parents = {}
    for i, (how, pick) in enumerate(steps):
        existing = list(parents)
        message = text_message(f"m{i}", f"message {i}")
        if how == "other session":
            other.append_message(message)
        elif how == "delete" and existing:
            gone = existing[pick % len(existing)]
            session.delete_messages([gone])
            parents = {m: parents[gone] if p == gone else p for m, p in parents.items() if m != gone}
        elif how == "fork" and existing:
            parents[f"m{i}"] = existing[pick % len(existing)]
            session.append_message(message, parent_id=parents[f"m{i}"])
        elif how == "root":
            parents[f"m{i}"] = None
            session.append_message(message, parent_id=None)
        else:  # under the newest message, which a delete may have changed
            parents[f"m{i}"] = existing[-1] if existing else None
            session.append_message(message)
    for leaf in set(parents) - set(parents.values()):
        branch, message = [], leaf
        while message is not None:
            branch.insert(0, message)
            message = parents[message]
        assert ids(session.get_history(leaf)) == branch
        assert session.get_path_length(leaf) == len(branch)
    assert store.integrity.messages_off_their_stretch() == []
