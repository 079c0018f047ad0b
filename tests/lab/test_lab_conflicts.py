"""Two people on the lab at once, on one database: a form saved from a version someone else has since
replaced is refused with both versions shown, until its user reloads or overwrites on purpose; a page
whose session was deleted says so and writes nothing; damaged rows show in a banner."""
import sqlite3

import pytest

from memorylab import Experiments, KVStore, Memory, Session, Store
from memorylab.memory.longterm import LongTermMemory
from memorylab.samples import LONGTERM_WORKSPACE
from tests.helpers import ROOT, confirm_in_dialog
from tests.lab.test_pages import run_page as open_page

SESSION = ("default", "support-bot", "support-order-4471")


@pytest.fixture
def lab_db(sample_lab_db):
    return sample_lab_db


def click(app, label, form=None):
    [button] = [b for b in app.button if b.label == label and (form is None or b.form_id == form)]
    button.click().run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def stored_block(lab_db, label="memory"):
    with Store(lab_db) as store:
        return Session.open(store, SESSION[2], agent_id=SESSION[1]).storage.blocks.content(label)


def conflict_diff(app):
    """The diff a form shows between the stored version and yours."""
    [diff] = [code.value for code in app.code if code.value.startswith("--- stored now")]
    return diff


# -- context blocks --------------------------------------------------------------------------------


def a_saves_memory_while_b_looks(lab_db):
    """A and B open Context blocks; A saves the memory block; B has not reloaded."""
    first, second = open_page("context_blocks.py"), open_page("context_blocks.py")
    first.text_area(key="text_memory").set_value("A: refund approved on 3 May")
    click(first, "Save", "edit_memory")
    assert stored_block(lab_db) == "A: refund approved on 3 May"
    return first, second


def test_a_stale_save_without_typing_no_longer_reverts_someone_elses_save(lab_db):
    _, second = a_saves_memory_while_b_looks(lab_db)
    click(second, "Save", "edit_todos")  # the path: another Save first, then memory's
    click(second, "Save", "edit_memory")
    assert stored_block(lab_db) == "A: refund approved on 3 May"
    assert any("Not saved: The memory block changed since you loaded it" in e.value for e in second.error)
    assert "+A: refund approved on 3 May" not in conflict_diff(second)
    assert "-A: refund approved on 3 May" in conflict_diff(second)  # the diff, stored now -> yours


def test_a_stale_save_of_typed_text_shows_both_versions_and_overwrites_only_on_purpose(lab_db):
    _, second = a_saves_memory_while_b_looks(lab_db)
    second.text_area(key="text_memory").set_value("B: customer prefers email")
    click(second, "Save", "edit_memory")
    assert stored_block(lab_db) == "A: refund approved on 3 May"
    assert "-A: refund approved on 3 May\n+B: customer prefers email" in conflict_diff(second)
    click(second, "Overwrite it with mine")
    assert stored_block(lab_db) == "B: customer prefers email"
    assert not [w for w in second.warning if "changed since you loaded it" in w.value]


def test_a_stale_form_reloads_the_stored_text(lab_db):
    _, second = a_saves_memory_while_b_looks(lab_db)
    second.run()
    assert any("changed since you loaded it" in w.value for w in second.warning)  # said before any Save
    click(second, "Reload: take the stored one")
    assert second.text_area(key="text_memory").value == "A: refund approved on 3 May"
    second.text_area(key="text_memory").set_value("A: refund approved on 3 May. B: and emailed")
    click(second, "Save", "edit_memory")
    assert stored_block(lab_db) == "A: refund approved on 3 May. B: and emailed"


def test_an_overwrite_never_covers_a_version_nobody_was_shown(lab_db):
    first, second = a_saves_memory_while_b_looks(lab_db)
    click(second, "Save", "edit_memory")  # refused: shows A's first save
    first.text_area(key="text_memory").set_value("A again: refund sent")
    click(first, "Save", "edit_memory")
    click(second, "Overwrite it with mine")  # over what B saw, not over "A again"
    assert stored_block(lab_db) == "A again: refund sent"
    assert "-A again: refund sent" in conflict_diff(second)
    click(second, "Overwrite it with mine")
    assert stored_block(lab_db) != "A again: refund sent"


# -- the selected session deleted by another process ----------------------------------------------


def test_a_page_whose_session_was_deleted_says_so_and_writes_nothing(lab_db):
    app = open_page("context_blocks.py", session_ref=SESSION)
    app.text_area(key="text_memory").set_value("typed for the deleted session")
    with Store(lab_db) as store:
        Memory(store, agent_id=SESSION[1]).clear(key=SESSION[2])
        before = {row["session_id"]: Session.open(store, row["session_id"], tenant_id=row["tenant_id"],
                                                  agent_id=row["agent_id"]).storage.blocks.all()
                  for row in store.sessions.list()}
    click(app, "Save", "edit_memory")
    assert any(f"Session `{SESSION[2]}`" in e.value and "no longer exists" in e.value for e in app.error)
    with Store(lab_db) as store:
        after = {row["session_id"]: Session.open(store, row["session_id"], tenant_id=row["tenant_id"],
                                                 agent_id=row["agent_id"]).storage.blocks.all()
                 for row in store.sessions.list()}
    assert after == before
    assert not app.text_area  # no form to type into
    picker = app.sidebar.selectbox[0]
    assert picker.value is None and not any(SESSION[2] in option for option in picker.options)
    picker.select_index(0).run()
    assert not app.exception and app.session_state["session_ref"] != SESSION
    assert not app.error and app.text_area(key="text_memory").value != "typed for the deleted session"


@pytest.mark.parametrize("page", ["memory.py", "long_term.py", "experiments.py", "compaction_lab.py", "sessions.py",
                                  "search.py"])
def test_every_page_stops_on_a_deleted_session(lab_db, page):
    app = open_page(page, session_ref=SESSION)
    with Store(lab_db) as store:
        Memory(store, agent_id=SESSION[1]).clear(key=SESSION[2])
    app.run()
    assert not app.exception
    assert any("no longer exists" in e.value for e in app.error)


# -- damaged rows ----------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::memorylab.errors.DamagedRowWarning")
def test_a_damaged_message_shows_a_banner_naming_it_and_the_repair(lab_db):
    with Store(lab_db) as store:
        session = Session.open(store, SESSION[2], agent_id=SESSION[1])
        damaged = session.get_history()[2]["id"]
    with sqlite3.connect(lab_db) as conn:
        conn.execute("UPDATE messages SET parts = '[{\"type\": \"te' WHERE id = ? AND session_pk ="
                     " (SELECT pk FROM sessions WHERE session_id = ?)", (damaged, SESSION[2]))
    app = open_page("chat.py", session_ref=SESSION)
    [banner] = [w.value for w in app.warning if "Damaged rows were skipped" in w.value]
    assert f"message {damaged!r}" in banner.replace("\\", "") and "check --repair" in banner
    app.run()  # the branch is cached now: the banner stays
    assert [w for w in app.warning if "Damaged rows were skipped" in w.value]
    clean = open_page("chat.py", session_ref=("default", "travel-planner", "trip-planning-branches"))
    assert not [w for w in clean.warning if "Damaged rows were skipped" in w.value]


# -- the other guarded forms -----------------------------------------------------------------------


def test_a_stale_kv_edit_is_refused_and_overwrites_only_on_purpose(lab_db):
    with Store(lab_db) as store:
        KVStore(store, namespace="carts").set("cart", {"items": 1})
    first, second = open_page("memory.py"), open_page("memory.py")
    for app in (first, second):
        app.selectbox(key="kv_namespace").select("carts").run()
        app.selectbox(key="kv_edit_key").select("cart").run()
        assert app.text_area(key="kv_value").value == '{\n  "items": 1\n}'
    first.text_area(key="kv_value").set_value('{"items": 2}')
    click(first, "Save entry")
    second.text_area(key="kv_value").set_value('{"items": 5}')
    click(second, "Save entry")
    with Store(lab_db) as store:
        assert KVStore(store, namespace="carts").get("cart") == {"items": 2}
    assert any("Not saved: Entry `cart` changed" in e.value for e in second.error)
    assert '+{"items": 5}' in conflict_diff(second) and '-  "items": 2' in conflict_diff(second)
    click(second, "Overwrite it with mine")
    with Store(lab_db) as store:
        assert KVStore(store, namespace="carts").get("cart") == {"items": 5}


def test_a_new_kv_key_taken_meanwhile_is_refused(lab_db):
    app = open_page("memory.py")
    app.text_input(key="kv_key").set_value("flag")
    app.text_area(key="kv_value").set_value("true")
    with Store(lab_db) as store:
        KVStore(store, namespace=app.selectbox(key="kv_namespace").value).set("flag", "someone else's")
    click(app, "Save entry")
    assert any("Entry `flag` changed" in e.value for e in app.error)
    with Store(lab_db) as store:
        assert KVStore(store, namespace=app.selectbox(key="kv_namespace").value).get("flag") == "someone else's"


def test_a_stale_record_edit_is_refused_and_reloads(lab_db):
    with Store(lab_db) as store:
        record_id = LongTermMemory(store, workspace=LONGTERM_WORKSPACE).records()[0]["id"]
    first, second = open_page("long_term.py"), open_page("long_term.py")
    for app in (first, second):
        app.session_state["ltm_table"] = {"selection": {"rows": [0], "columns": []}}
        app.run()
        assert app.text_input(key="ltm_summary").value
    first.text_input(key="ltm_summary").set_value("A: prefers email")
    click(first, "Save changes")
    second.text_input(key="ltm_summary").set_value("B: prefers phone")
    click(second, "Save changes")
    with Store(lab_db) as store:
        stored = LongTermMemory(store, workspace=LONGTERM_WORKSPACE).get_record(record_id)
        assert stored["summary"] == "A: prefers email"
    assert "-summary: A: prefers email\n+summary: B: prefers phone" in conflict_diff(second)
    click(second, "Reload: take the stored one")
    assert second.text_input(key="ltm_summary").value == "A: prefers email"


@pytest.fixture
def saved_experiment(lab_db):
    with Store(lab_db) as store:
        experiments = Experiments(store)
        spec = experiments.spec(ROOT / "sample_data" / "experiments" / "sample.yaml")
        experiments.save(spec)
    return spec.name


def test_a_stale_experiment_save_is_refused_with_both_specs(lab_db, saved_experiment):
    first, second = open_page("experiments.py"), open_page("experiments.py")
    for app in (first, second):
        app.selectbox(key="exp_choice").select(saved_experiment).run()
        app.session_state["exp_tab"] = "Arms"  # the editors draw only on their open tab
        app.run()
    first.text_area(key=[k for k in first.session_state if str(k).startswith("exp_description:")][0]) \
        .set_value("A's description").run()
    click(first, "Save")
    second.text_area(key=[k for k in second.session_state if str(k).startswith("exp_description:")][0]) \
        .set_value("B's description").run()
    click(second, "Save")
    with Store(lab_db) as store:
        assert Experiments(store).get(saved_experiment).description == "A's description"
    assert any("Not saved: The saved experiment" in e.value for e in second.error)
    assert "-description: A's description\n+description: B's description" in conflict_diff(second)
    click(second, "Overwrite it with mine")
    with Store(lab_db) as store:
        assert Experiments(store).get(saved_experiment).description == "B's description"


def test_a_summary_made_before_someone_else_compacted_the_branch_is_not_accepted(lab_db):
    second = open_page("compaction_lab.py", session_ref=SESSION, completion_kwargs={"mock_response": "B's summary"})
    second.number_input(key="main_tail").set_value(100).run()
    click(second, "Run the summarizer")
    first = open_page("compaction_lab.py", session_ref=SESSION, completion_kwargs={"mock_response": "A's summary"})
    first.number_input(key="main_tail").set_value(600).run()
    click(first, "Run the summarizer")
    confirm_in_dialog(click(first, "Accept: add as an overlay"), "accept_summary")
    second.run()
    assert any("The branch changed since you loaded it" in w.value for w in second.warning)
    confirm_in_dialog(click(second, "Accept: add as an overlay"), "accept_summary")
    with Store(lab_db) as store:
        overlays = Session.open(store, SESSION[2], agent_id=SESSION[1]).get_compactions()
    assert [overlay["summary"] for overlay in overlays] == ["A's summary"]
    assert "updating the earlier summary: A's summary" in conflict_diff(second)


def test_a_status_set_since_the_row_was_loaded_is_not_reverted(lab_db):
    first, second = open_page("memory.py"), open_page("memory.py")
    for app in (first, second):
        app.session_state["memory_table"] = {"selection": {"rows": [0], "columns": []}}
        app.run()
    key = first.dataframe[0].value["id"][0]
    loaded = second.text_input(key="memory_new_status").value
    first.text_input(key="memory_new_status").set_value("won")
    click(first, "Set status")
    second.text_input(key="memory_new_status").set_value("qualified-again")
    click(second, "Set status")
    with Store(lab_db) as store:
        assert Memory(store, agent_id="sales-assistant", memory_key=key).get()["metadata"]["status"] == "won"
    assert any("the status changed since you loaded it" in e.value and "“won”" in e.value for e in second.error)
    assert loaded != "won"
    click(second, "Set status")  # a second click replaces the status it was shown, on purpose
    with Store(lab_db) as store:
        stored = Memory(store, agent_id="sales-assistant", memory_key=key).get()
        assert stored["metadata"]["status"] == "qualified-again"
