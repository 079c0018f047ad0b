"""An imported session is chatted and measured with its own context, the sample's only when the
sidebar's switch attaches it; a sample session keeps the sample context it was made with."""
import json

import pytest

from memorylab import Store
from memorylab.importers import import_source
from tests.helpers import run_app_page

CONVERSATION = [
    {"role": "system", "content": "You are Quill, a terse release-notes bot."},
    {"role": "user", "content": "Summarize 2.3.1 in one line."},
    {"role": "assistant", "content": "2.3.1 fixes the CSV importer's encoding crash."},
]
SWITCH = "Attach the lab's sample context"


@pytest.fixture
def imported_ref(sample_lab_db, tmp_path):
    """The samples' lab database with an OpenAI message list imported into it; its session's ref."""
    path = tmp_path / "release-bot.json"
    path.write_text(json.dumps(CONVERSATION), encoding="utf-8")
    with Store(sample_lab_db) as store:
        imported = import_source(store, path).sessions[0]
    return ("default", imported.agent_id, imported.session_id)


def run_page(name, ref, **state):
    return run_app_page(f"app_pages/{name}", session_ref=ref, **state)


def switch(app):
    return next(toggle for toggle in app.sidebar.toggle if toggle.label == SWITCH)


def test_an_imported_session_is_chatted_with_its_own_system_prompt_tools_and_memory(imported_ref):
    app = run_page("chat.py", imported_ref, completion_kwargs={"mock_response": "2.3.2 adds nothing."})
    assert switch(app).value is False
    assert any("imported from" in caption.value for caption in app.sidebar.caption)
    app.chat_input[0].set_value("And 2.3.2?").run()
    sent = app.session_state["last_request"]["request"]
    assert sent["messages"][0] == {"role": "system", "content": "You are Quill, a terse release-notes bot."}
    assert sent["tools"] == [] and sent["memories"] == []
    assert "You are Mira" not in json.dumps(sent)

    switch(app).set_value(True).run()  # attached on purpose: the sample persona, its tools and memory
    request = app.session_state["last_request"]["request"]
    app.chat_input[0].set_value("And 2.3.3?").run()
    sent = app.session_state["last_request"]["request"]
    assert sent is not request and "You are Mira" in sent["messages"][0]["content"] and sent["tools"]


def test_the_context_window_of_an_imported_session_is_its_branch_and_says_where_rows_come_from(
        imported_ref, sample_lab_db):
    app = run_page("context_window.py", imported_ref)
    table = app.dataframe[0].value
    assert set(table["part"]) == {"messages"}
    assert set(table["source"]) == {"this session's messages on this branch"}
    with Store(sample_lab_db) as store:
        branch_tokens = store.sessions.list(agent_id=imported_ref[1])[0]["tokens"]
    assert app.metric[0].value == f"{branch_tokens:,} tokens"  # the request is the branch, nothing added

    switch(app).set_value(True).run()
    sources = dict(zip(app.dataframe[0].value["item"], app.dataframe[0].value["source"]))
    assert sources["soul"] == "the lab's sample context: file sample_data/soul.md"
    assert sources["set_context"] == "made for the blocks memory, todos, knowledge"


def test_a_sample_session_has_the_sample_context_on_by_default(sample_lab_db):
    app = run_page("context_window.py", ("default", "support-bot", "support-order-4471"))
    assert switch(app).value is True
    assert "the lab's sample context: file sample_data/soul.md" in set(app.dataframe[0].value["source"])
