"""Pages over a store of many sessions, agents and KV entries draw a page of them, never all."""
import pytest

from memorylab import KVStore, Memory, Session, Store
from tests.lab.test_pages import run_page

TICKETS = 240


@pytest.fixture
def crowded_db(sample_lab_db):
    """The samples (eight sessions) and 240 more, one of them titled "Printer jam"."""
    with Store(sample_lab_db) as store:
        for number in range(TICKETS):
            Session.create(store, f"ticket-{number:03d}", agent_id="helpdesk",
                           metadata={"title": "Printer jam" if number == 42 else f"Ticket {number}"})
        assert store.sessions.count() == TICKETS + 8
    return sample_lab_db


def test_the_sessions_table_shows_one_page_and_pages_through_the_rest(crowded_db):
    app = run_page("sessions.py")
    assert len(app.dataframe[0].value) == 100
    assert app.metric[0].value == "248"
    assert app.metric[1].value == f"{sum(app.dataframe[0].value['messages']):,}"
    seen = set(app.dataframe[0].value["session"])
    for page in (2, 3):
        app.number_input(key="sessions_page").set_value(page).run()
        seen |= set(app.dataframe[0].value["session"])
    with Store(crowded_db) as store:
        assert seen == {row["session_id"] for row in store.sessions.list()}
    assert len(app.dataframe[0].value) == 48


def test_a_search_narrows_the_table_and_a_row_opens_its_session(crowded_db):
    app = run_page("sessions.py")
    app.number_input(key="sessions_page").set_value(3).run()
    app.text_input(key="sessions_search").set_value("printer").run()
    assert not app.exception and list(app.dataframe[0].value["session"]) == ["ticket-042"]
    assert app.metric[0].value == "1 of 248" and not app.number_input
    app.text_input(key="sessions_search").set_value("no such session").run()
    assert not app.dataframe and "no such session" in app.info[0].value


def test_long_term_session_choices_are_a_searched_page(crowded_db):
    app = run_page("long_term.py")
    target = app.selectbox(key="ltm_target")
    assert len(target.options) == 51 and target.value == "support-order-4471"  # the selected one first
    app.text_input(key="ltm_target_search").set_value("printer").run()
    assert app.selectbox(key="ltm_target").options == ["ticket-042"]


def test_the_memory_page_offers_tenants_and_a_page_of_kv_entries(sample_lab_db):
    with Store(sample_lab_db) as store:
        Memory(store, agent_id="other-agent", tenant_id="acme", memory_key="id:x").append("user", "hi")
        kv = KVStore(store, namespace="bulk")
        for number in range(150):
            kv.set(f"key:{number:03d}", number)
    app = run_page("memory.py")
    assert app.selectbox(key="memory_tenant").options == ["acme", "default"]
    app.selectbox(key="kv_namespace").select("bulk").run()
    assert len(app.dataframe[1].value) == 100 and [m.value for m in app.metric if m.label == "Entries"] == ["150"]
    app.number_input(key="kv_offset").set_value(100).run()
    assert list(app.dataframe[1].value["key"]) == [f"key:{number:03d}" for number in range(100, 150)]
