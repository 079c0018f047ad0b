"""What the lab draws of the compaction audit, built in the engine: the store's change stamp a page
keys its cached audits on, the table of compactions worst first and the retention chart."""
from memorylab import Session
from memorylab.audit import audit_session, iter_store_audits, retention_totals
from memorylab.display.frames import audit_table
from memorylab.display.viz import retention_figure
from memorylab.importers import import_source
from tests.helpers import ROOT, text_message

COMPACTED = ROOT / "tests" / "data" / "claude_code" / "compacted.jsonl"


def test_the_stamp_moves_with_every_change_an_audit_reads(store):
    stamps = [store.sessions.stamp()]
    session = Session.create(store, "stamped")
    stamps.append(store.sessions.stamp())
    session.append_message(text_message("m0", "Config in deploy/prod/settings.toml."))
    session.append_message(text_message("m1", "Noted."))
    stamps.append(store.sessions.stamp())
    overlay = session.add_compaction("Config noted.", "m0", "m0")
    stamps.append(store.sessions.stamp())
    assert store.sessions.stamp() == stamps[-1]  # nothing changed: the same stamp, so a cache holds
    later = session.add_compaction("Config noted, and acknowledged.", "m0", "m1")
    stamps.append(store.sessions.stamp())
    session.storage.delete_overlay(overlay["id"])  # as many overlays as before, but not the same ones
    stamps.append(store.sessions.stamp())
    assert len(set(stamps)) == len(stamps)
    session.storage.delete_overlay(later["id"])
    assert store.sessions.stamp() == stamps[2]  # back to no overlay: what was audited then holds again
    session.remove_compaction(session.add_compaction("Config noted.", "m0", "m0")["id"])
    assert store.sessions.stamp() not in stamps  # an undo records what it removed: the session changed


def test_a_message_appended_within_the_millisecond_of_the_last_change_moves_the_stamp(store):
    session = Session.create(store, "quick")
    session.append_message(text_message("m0", "Config in deploy/prod/settings.toml."))
    before = store.sessions.stamp()
    session.append_message(text_message("m1", "Noted."))
    with store.transaction() as conn:  # the update's time as it was: both writes in one millisecond
        conn.execute("UPDATE sessions SET updated_at = ? WHERE session_id = 'quick'", (before[1],))
    assert store.sessions.stamp() != before


def test_the_table_lists_the_compactions_worst_first(store):
    import_source(store, COMPACTED)
    (row,) = store.sessions.list()
    audits = audit_session(Session.open(store, row["session_id"], agent_id=row["agent_id"]))
    table = audit_table(audits)
    assert list(table["overlay_id"]) == [2, 1]  # overlay 2 kept 1 of 4 artifacts, overlay 1 all of its 2
    assert list(table["lost"]) == [3, 0] and list(table["kept"]) == [1, 2]
    assert list(table["retained"]) == [0.25, 1.0]
    assert set(table["session_id"]) == {row["session_id"]}


def test_a_compaction_whose_span_states_nothing_comes_last(store):
    session = Session.create(store, "quiet")
    for i, text in enumerate(["hello", "hi there", "The config is in deploy/prod/settings.toml.", "ok"]):
        session.append_message(text_message(f"m{i}", text))
    session.add_compaction("Greetings.", "m0", "m1")
    session.add_compaction("Greetings; a config file.", "m2", "m2")
    table = audit_table(audit_session(session))
    assert list(table["overlay_id"]) == [2, 1]
    assert table["retained"].isna().tolist() == [False, True]


def test_the_retention_chart_has_a_bar_per_kind_kept_and_lost(store):
    import_source(store, COMPACTED)
    by_kind = retention_totals(iter_store_audits(store))
    figure = retention_figure(by_kind)
    kept, lost = figure.data
    assert (kept.name, lost.name) == ("kept", "lost")
    assert list(kept.y) == list(lost.y) == ["path", "quantity"]
    assert list(kept.x) == [0.0, 0.75] and list(lost.x) == [1.0, 0.25]
    assert list(kept.customdata[1]) == [3, 1]  # quantity: 3 kept of 4, as the hover says


def test_the_retention_chart_of_no_compactions_says_so():
    figure = retention_figure({})
    assert not figure.data and "No compaction" in figure.layout.annotations[0].text
