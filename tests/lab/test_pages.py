"""Every page through Streamlit's AppTest on a temporary lab database, alone and inside the app."""
import ast
import re

import pytest
from streamlit.testing.v1 import AppTest

from memorylab import Experiments, KVStore, Memory, Session, Store, load_samples
from tests.helpers import ROOT, confirm_in_dialog, run_app_page, text_message

# The pages app.py navigates to: every script in app_pages/ (their shared parts are in lab_ui/).
PAGES = sorted(re.findall(r'st\.Page\("app_pages/([\w]+\.py)"', (ROOT / "app.py").read_text()))


@pytest.fixture
def lab_db(sample_lab_db):
    """Every page test starts where the app's first start leaves the lab: on the samples."""
    return sample_lab_db


def run_page(name, **state):
    return run_app_page(f"app_pages/{name}", **state)


@pytest.mark.parametrize("name", PAGES)
def test_every_page_renders_on_its_own(lab_db, name):
    app = run_page(name)
    assert app.title, f"{name} shows no title"
    assert app.sidebar.selectbox[0].label == "Session"


def test_session_selection_is_shared_and_survives_page_switches(lab_db):
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    app.run()
    app.switch_page("app_pages/tree.py").run()
    assert not app.exception
    picker = app.sidebar.selectbox[0]
    picker.select_index([i for i, o in enumerate(picker.options) if "Lisbon" in o or "trip" in o.lower()][0]).run()
    assert app.session_state["session_ref"] == ("default", "travel-planner", "trip-planning-branches")
    branch = [s for s in app.selectbox if s.label.startswith("Active branch")][0]
    other = [i for i, o in enumerate(branch.options) if o != branch.options[branch.index]][0]
    branch.select_index(other).run()
    leaf_id = app.session_state["leaf_id"]
    assert branch.options[other].startswith(leaf_id)
    with Store(lab_db) as store:
        session = Session.open(store, "trip-planning-branches", agent_id="travel-planner")
        expected = [m["id"] for m in session.get_history(leaf_id)]
    assert list(app.dataframe[0].value["id"]) == expected
    app.switch_page("app_pages/context_window.py").run()
    assert not app.exception
    assert app.title[0].value == "Context window"
    assert app.session_state["leaf_id"] == leaf_id
    assert app.session_state["session_ref"] == ("default", "travel-planner", "trip-planning-branches")


def test_a_store_of_many_sessions_is_searched_from_the_sidebar_not_listed(lab_db):
    with Store(lab_db) as store:
        for number in range(150):
            Session.create(store, f"ticket-{number:03d}", agent_id="helpdesk",
                           metadata={"title": f"Printer jam #{number}" if number == 42 else f"Ticket {number}"})
    app = run_page("sessions.py")
    picker = app.sidebar.selectbox[0]
    assert len(picker.options) == 51  # the newest 50 and the sample session already chosen
    assert app.session_state["session_ref"][2] == "support-order-4471"
    app.sidebar.text_input(key="session_search").set_value("printer").run()
    picker = app.sidebar.selectbox[0]
    assert [o for o in picker.options if "ticket-042" in o] and len(picker.options) == 2
    picker.select_index([i for i, o in enumerate(picker.options) if "ticket-042" in o][0]).run()
    assert not app.exception and app.session_state["session_ref"] == ("default", "helpdesk", "ticket-042")
    app.sidebar.text_input(key="session_search").set_value("").run()
    assert "ticket-042" in app.sidebar.selectbox[0].value and len(app.sidebar.selectbox[0].options) == 51


def test_context_block_over_budget_shows_the_refusal_and_keeps_the_content(lab_db):
    app = run_page("context_blocks.py")
    area = [t for t in app.text_area if t.key == "text_memory"][0]
    area.set_value("word " * 2000)
    app.button(key="FormSubmitter:edit_memory-Save").click().run()
    assert any("allows 1100 tokens" in e.value for e in app.error)
    with Store(lab_db) as store:
        ref = app.session_state["session_ref"]
        session = Session.open(store, ref[2], agent_id=ref[1], tenant_id=ref[0])
        assert session.storage.blocks.content("memory") in (None, "")


def test_context_block_edit_then_refresh_prompt(lab_db):
    app = run_page("context_blocks.py")
    [t for t in app.text_area if t.key == "text_memory"][0].set_value("Customer prefers email.")
    app.button(key="FormSubmitter:edit_memory-Save").click().run()
    assert any("Blocks changed since the prompt was frozen" in w.value for w in app.warning)
    [b for b in app.button if b.label == "Refresh system prompt"][0].click().run()
    assert any("frozen prompt matches" in s.value for s in app.success)
    assert any("Customer prefers email." in c.value for c in app.code)


def test_context_window_page_shows_the_breakdown(lab_db):
    app = run_page("context_window.py")
    table = app.dataframe[0].value
    assert {"system prompt", "tool schemas", "messages"} <= set(table["part"])
    assert app.metric[0].label == "Estimated request"


def open_lab_session(lab_db, ref):
    store = Store(lab_db)
    return store, Session.open(store, ref[2], agent_id=ref[1], tenant_id=ref[0])


def test_chat_turn_with_a_mocked_model_is_stored_and_shown(lab_db):
    app = run_page("chat.py", completion_kwargs={"mock_response": "Your refund of €49.90 is on its way."})
    app.chat_input[0].set_value("Where is my refund?").run()
    assert not app.exception, [e.message for e in app.exception]
    texts = [m.value for m in app.markdown]
    assert "Where is my refund?" in texts and "Your refund of €49.90 is on its way." in texts
    sent = app.session_state["last_request"]["request"]
    assert sent["messages"][-1] == {"role": "user", "content": "Where is my refund?"}
    assert any("A-4471" in m["summary"] for m in sent["memories"])  # long-term recall ran before the turn
    assert any(e.label.startswith("Long-term memories injected") for e in app.expander)
    store, session = open_lab_session(lab_db, app.session_state["session_ref"])
    with store:
        latest = session.get_latest_leaf()
        assert latest["role"] == "assistant" and latest["metadata"]["model"] == app.session_state["model"]
        assert app.session_state["leaf_id"] == latest["id"]
        assert session.get_message(latest["parent_id"])["parts"][0]["text"] == "Where is my refund?"


def test_chat_draws_the_newest_messages_of_a_long_branch_and_loads_earlier_ones_on_request(lab_db):
    with Store(lab_db) as store:
        session = Session.create(store, "long-chat")
        for number in range(260):
            session.append_message(text_message(f"m{number}", f"message number {number}",
                                                 "user" if number % 2 == 0 else "assistant"))
    app = run_page("chat.py", session_ref=("default", "default", "long-chat"))
    drawn = [m.markdown[0].value for m in app.chat_message]
    assert drawn == [f"message number {n}" for n in range(210, 260)]
    assert any("50 of 260 messages shown" in c.value for c in app.caption)
    app.button(key="chat_earlier").click().run()
    assert not app.exception
    assert len(app.chat_message) == 100 and app.chat_message[0].markdown[0].value == "message number 160"
    for _ in range(4):
        app.button(key="chat_earlier").click().run()
    assert len(app.chat_message) == 260 and not [b for b in app.button if b.key == "chat_earlier"]


def test_a_message_opened_from_search_is_drawn_by_the_chat_however_far_back_it_is(lab_db):
    with Store(lab_db) as store:
        session = Session.create(store, "long-chat")
        for number in range(120):
            session.append_message(text_message(f"m{number}", f"message number {number}"))
    search = run_page("search.py")
    search.text_input(key="search_query").set_value('"number 7"').run()
    hit = [c.value for c in search.caption if "`m7`" in c.value]
    assert hit, [c.value for c in search.caption]
    index = [c.value for c in search.caption if "· user ·" in c.value].index(hit[0])
    search.button(key=f"open_chat_{index}").click().run()
    assert search.session_state["focus_message"] == "m7" and search.session_state["leaf_id"] == "m119"
    chat = run_page("chat.py", session_ref=("default", "default", "long-chat"), leaf_id="m119", focus_message="m7")
    drawn = [m.markdown[0].value for m in chat.chat_message]
    assert drawn[0] == "message number 7" and len(drawn) == 113


def test_chat_regenerate_makes_a_sibling_branch(lab_db):
    app = run_page("chat.py", completion_kwargs={"mock_response": "A different answer."})
    store, session = open_lab_session(lab_db, app.session_state["session_ref"])
    with store:
        last_answer = [m for m in session.get_history() if m["role"] == "assistant"][-1]
        app.button(key=f"regen_{last_answer['id']}").click().run()
        assert not app.exception, [e.message for e in app.exception]
        siblings = session.get_branches(last_answer["parent_id"])
        assert len(siblings) == 2 and siblings[1]["parts"][0]["text"] == "A different answer."
        assert app.session_state["leaf_id"] == siblings[1]["id"]


def test_chat_model_error_is_shown_and_the_user_message_kept(lab_db):
    app = run_page("chat.py", model="gpt-4o-mini", completion_kwargs={"mock_response": "litellm.RateLimitError"})
    app.chat_input[0].set_value("hello?").run()
    assert not app.exception
    assert app.error, "the model error is shown in the page"
    store, session = open_lab_session(lab_db, app.session_state["session_ref"])
    with store:
        assert session.get_latest_leaf()["parts"][0]["text"] == "hello?"


def test_compaction_lab_preview_reject_and_accept(lab_db):
    ref = ("default", "project-assistant", "long-migration-project")
    app = run_page("compaction_lab.py", session_ref=ref, completion_kwargs={"mock_response": "## Topic\nMigration."})
    before = app.metric[2].value
    app.number_input(key="main_tail").set_value(1000).run()
    assert app.metric[2].value != before  # a smaller tail summarizes more messages
    [b for b in app.button if b.label == "Run the summarizer"][0].click().run()
    assert any(t.key == "proposal_text" for t in app.text_area)
    [b for b in app.button if b.label == "Reject"][0].click().run()
    store, session = open_lab_session(lab_db, ref)
    with store:
        assert session.get_compactions() == []
        [b for b in app.button if b.label == "Run the summarizer"][0].click().run()
        [t for t in app.text_area if t.key == "proposal_text"][0].set_value("## Topic\nEdited summary.")
        [b for b in app.button if b.label.startswith("Accept")][0].click().run()
        assert session.get_compactions() == []  # not before it is confirmed
        confirm_in_dialog(app, "accept_summary")
        assert not app.exception
        (overlay,) = session.get_compactions()
        assert overlay["summary"] == "## Topic\nEdited summary."
        assert any(m["id"] == f"compaction_{overlay['id']}" for m in session.get_history())


def test_compaction_lab_ab_reports_fact_survival(lab_db):
    ref = ("default", "project-assistant", "long-migration-project")
    # Before m150: the session's last message is a retro restating every fact, so a tail holding it keeps all.
    app = run_page("compaction_lab.py", session_ref=ref, leaf_id="m150",
                   completion_kwargs={"mock_response": "The orders table is 48 GB; 2.3M customers."})
    app.number_input(key="B_tail").set_value(500).run()
    [b for b in app.button if b.label == "Summarize both and compare"][0].click().run()
    assert not app.exception
    kept = [m.value for m in app.metric if m.label == "Facts kept"]
    assert [value.split(" / ")[1] for value in kept] == ["12", "12"]
    a, b = (int(value.split(" / ")[0]) for value in kept)
    assert 2 <= b < a  # B's short tail loses what only the mocked two-fact summary does not restate
    with Store(lab_db) as store:
        assert Experiments(store).trials("quick-ab-long-migration-project")[0]["runs"] == 2


def test_search_hit_selects_its_branch(lab_db):
    app = run_page("search.py")
    app.text_input(key="search_query").set_value("Porto").run()
    assert not app.exception
    assert app.button(key="open_chat_0")
    app.button(key="open_tree_0").click().run()
    ref = app.session_state["session_ref"]
    assert ref[2] == "trip-planning-branches"
    store, session = open_lab_session(lab_db, ref)
    with store:
        leaf = app.session_state["leaf_id"]
        assert session.get_message(leaf) is not None and not session.get_branches(leaf)


def test_search_escapes_markdown_and_html(lab_db):
    app = run_page("search.py")
    with Store(lab_db) as store:
        Session.create(store, "hostile").append_message(
            {"role": "user", "content": "<img src=x onerror=alert(1)> **bold** [link](http://x)"})
    app.text_input(key="search_query").set_value("onerror").run()
    rendered = [m.value for m in app.markdown if "onerror" in m.value]
    # every markdown character is escaped; only the matched word is made bold
    assert rendered == ["\\<img src=x **onerror**=alert\\(1\\)\\> \\*\\*bold\\*\\* \\[link\\]\\(http\\://x\\)"]


def test_search_stays_in_the_selected_sessions_tenant_unless_every_tenant_is_asked(lab_db):
    with Store(lab_db) as store:
        Session.create(store, "elsewhere", tenant_id="acme").append_message(
            {"role": "user", "content": "the zeppelin order of acme"})
    app = run_page("search.py")
    app.text_input(key="search_query").set_value("zeppelin").run()
    assert app.session_state["session_ref"][0] == "default"
    assert "**0** hits" in [m.value for m in app.markdown]
    app.radio(key="search_scope").set_value("All tenants").run()
    assert not app.exception and "**1** hit" in [m.value for m in app.markdown]
    assert any("elsewhere" in c.value and "tenant `acme`" in c.value for c in app.caption)


def test_memory_page_lists_memories_and_sets_a_status(lab_db):
    app = run_page("memory.py")
    assert [s for s in app.selectbox if s.label == "Agent"][0].value.startswith("sales-assistant")
    table = app.dataframe[0].value
    assert set(table["id"]) == {"phone:+447700900123", "email:priya.n@example.org", "id:lead-7731"}
    assert dict(zip(table["id"], table["status"]))["phone:+447700900123"] == "qualified"
    app.text_input(key="memory_status").set_value("closed").run()
    assert list(app.dataframe[0].value["id"]) == ["id:lead-7731"]


def test_kv_browser_adds_refuses_and_deletes(lab_db):
    app = run_page("memory.py")
    app.selectbox(key="kv_namespace").select("support-bot").run()
    app.text_input(key="kv_pattern").set_value("prefs:*").run()
    assert list(app.dataframe[1].value["key"]) == ["prefs:marta.kowalczyk@example.com"]
    app.text_input(key="kv_pattern").set_value("*").run()
    form_inputs = [t for t in app.text_input if t.label == "Key"]
    form_inputs[0].set_value("x" * 600)
    [t for t in app.text_area if t.label == "Value (any JSON)"][0].set_value('{"a": 1}')
    app.button(key="FormSubmitter:kv_edit-Save entry").click().run()
    assert any("at most 512 characters" in e.value for e in app.error)
    [t for t in app.text_input if t.label == "Key"][0].set_value("note:1")
    [t for t in app.text_area if t.label == "Value (any JSON)"][0].set_value('{"n": [1, 2.5, null]}')
    app.button(key="FormSubmitter:kv_edit-Save entry").click().run()
    with Store(lab_db) as store:
        namespace = app.session_state["kv_namespace"]
        assert KVStore(store, namespace=namespace).get("note:1") == {"n": [1, 2.5, None]}
    app.selectbox(key="kv_delete_key").select("note:1").run()
    [b for b in app.button if b.label == "Delete note:1"][0].click().run()
    with Store(lab_db) as store:
        assert not KVStore(store, namespace=namespace).has("note:1")


def test_admin_hides_other_tenants_like_missing_agents(lab_db):
    with Store(lab_db) as store:
        load_samples(store)
        Memory(store, agent_id="secret-agent", tenant_id="acme", memory_key="id:x").append("user", "hi")
    app = run_page("memory.py")
    app.text_input(key="admin_agent").set_value("secret-agent").run()
    app.button(key="admin_run").click().run()
    missing = [e.value for e in app.error]
    app.text_input(key="admin_agent").set_value("no-such-agent").run()
    app.button(key="admin_run").click().run()
    assert missing == ["NotFoundError: no agent 'secret-agent': pass the id, slug or name of an agent of this tenant"]
    assert [e.value for e in app.error] == [missing[0].replace("secret-agent", "no-such-agent")]


def test_long_term_page_lists_records_and_runs_a_retrieval(lab_db):
    app = run_page("long_term.py")
    table = app.dataframe[0].value
    assert {"GLOBAL_MEMORY", "SESSION_MEMORY"} == set(table["scope"])
    app.selectbox(key="ltm_scope").select("SESSION_MEMORY").run()
    app.selectbox(key="ltm_session").select("support-order-4471").run()
    assert set(app.dataframe[0].value["session_id"]) == {"support-order-4471"}
    app.selectbox(key="ltm_target").select("support-order-4471").run()
    [b for b in app.button if b.label == "Run prepare_request"][0].click().run()
    assert not app.exception
    injected = [c.value for c in app.code if "Long-term memories" in c.value]
    assert injected and "A-4471" in injected[0]
    codes = set(app.dataframe[-1].value["code"])
    assert "memory_rerank_skipped" in codes


def test_a_long_term_selection_never_moves_to_another_record(lab_db):
    app = run_page("long_term.py")
    records = list(app.dataframe[0].value["id"])
    app.session_state["ltm_table"] = {"selection": {"rows": [len(records) - 1], "columns": []}}
    app.run()
    assert app.markdown[0].value.startswith(f"**Record {records[-1]}**")
    [b for b in app.button if b.label == "Delete record"][0].click().run()
    assert not app.exception  # the selected row number is past the end of the shorter list
    assert list(app.dataframe[0].value["id"]) == records[:-1]
    assert not [m for m in app.markdown if m.value.startswith("**Record ")]  # nothing moved into its row

    app.session_state[f"ltm_table:{app.session_state['ltm_table:version']}"] = {"selection": {"rows": [0],
                                                                                             "columns": []}}
    app.run()
    assert app.markdown[0].value.startswith(f"**Record {records[0]}**")
    app.selectbox(key="ltm_scope").select("SESSION_MEMORY").run()  # another list: row 0 is another record
    assert not [m for m in app.markdown if m.value.startswith("**Record ")]


def test_long_term_session_memories_never_leak_into_another_session(lab_db):
    app = run_page("long_term.py")
    app.selectbox(key="ltm_target").select("trip-planning-branches").run()
    app.text_area(key="ltm_prompt").set_value("refund A-4471 Visa").run()
    [b for b in app.button if b.label == "Run prepare_request"][0].click().run()
    injected = " ".join(c.value for c in app.code)
    assert "Visa ending 4412" not in injected


def _open_database(app, target):
    [box] = [t for t in app.sidebar.text_input if t.label == "SQLite file or PostgreSQL URL"]
    box.set_value(target)
    app.button(key="FormSubmitter:open_database-Open").click().run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def test_the_sidebar_switches_to_postgres_and_keeps_the_current_database_on_failure(lab_db, postgres_url, tmp_path):
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    app.run()
    assert app.session_state["session_ref"][2] == "support-order-4471"

    _open_database(app, "postgresql://ada:s3cret@/memory?host=/nowhere")
    assert any("Leave the password out of the URL" in e.value for e in app.error)
    _open_database(app, f"postgresql://ada@/memory?host={tmp_path}")
    assert any(e.value.startswith("Could not open it, so the current database stays open") for e in app.error)
    assert "database" not in app.session_state and app.session_state["session_ref"][2] == "support-order-4471"

    _open_database(app, postgres_url)
    assert app.session_state["database"] == postgres_url
    assert any("holds no session yet" in i.value for i in app.info)  # a shared database is not filled unasked
    app.button[0].click().run()
    assert not app.exception
    with Store(postgres_url) as store:
        sessions = {s["session_id"] for s in store.sessions.list()}
    assert "support-order-4471" in sessions
    assert set(app.dataframe[0].value["session"]) == sessions
    app.switch_page("app_pages/search.py").run()
    assert not app.exception and app.session_state["database"] == postgres_url


def test_the_sidebar_keeps_the_current_database_when_a_file_is_not_one(lab_db, tmp_path):
    foreign = tmp_path / "notes.db"
    foreign.write_text("these are not the pages of a database " * 200)
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    app.run()
    _open_database(app, str(foreign))
    assert any(e.value.startswith("Could not open it, so the current database stays open") and
               "file is not a database" in e.value for e in app.error)
    assert "database" not in app.session_state and app.session_state["session_ref"][2] == "support-order-4471"


@pytest.mark.parametrize("name", PAGES)
def test_pages_hold_no_bare_strings_streamlit_would_draw(name):
    """Streamlit's magic draws every bare expression of a page script: a docstring under a constant
    shows on the page as text. A page says what it is and what state it keeps in comments."""
    body = ast.parse((ROOT / "app_pages" / name).read_text()).body
    drawn = [node.lineno for node in body
             if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
             and isinstance(node.value.value, str)]
    assert drawn == [], f"{name}: bare strings at lines {drawn}"
    assert (ROOT / "app_pages" / name).read_text().startswith("# "), f"{name} does not open with its comment"


def test_the_page_folder_holds_only_the_pages_app_py_registers_each_at_its_url():
    """A helper module among the page scripts would be a page nobody navigates to; the url_paths are
    the links people keep."""
    assert sorted(path.name for path in (ROOT / "app_pages").iterdir()) == PAGES
    assert not (ROOT / "pages").exists(), "Streamlit lists a pages/ folder's files in a deep link's sidebar"
    registered = dict(re.findall(r'st\.Page\("app_pages/(\w+)\.py".*?url_path="(\w+)"', (ROOT / "app.py").read_text()))
    assert registered == {name.removesuffix(".py"): name.removesuffix(".py") for name in PAGES if name != "sessions.py"}
