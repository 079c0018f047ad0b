"""The Sessions page's import panel through AppTest: upload, preview, import with progress, again."""
import json
import sqlite3

from streamlit.testing.v1 import AppTest

from memorylab import Session, Store, export_session
from tests.helpers import ROOT

CONVERSATIONS = [
    {"id": "paris", "title": "Paris weather", "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
        {"role": "assistant", "content": "18C and <b>sunny</b>."},
    ]},
    {"id": "lisbon", "messages": [{"role": "user", "content": "And Lisbon?"}]},
]


def jsonl(conversations):
    return "".join(json.dumps(c) + "\n" for c in conversations).encode()


def sessions_page():
    app = AppTest.from_file(str(ROOT / "app_pages" / "sessions.py"), default_timeout=60)
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def upload(app, name, content):
    app.file_uploader(key="import_file").set_value((name, content, "application/octet-stream")).run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def import_button(app):
    return next(b for b in app.button if b.key == "import_run")


def test_an_upload_is_previewed_then_imported_and_opened(lab_db):
    app = upload(sessions_page(), "chats.jsonl", jsonl(CONVERSATIONS))
    assert "OpenAI chat messages" in app.markdown[0].value and "5 messages, 5 of them new." in app.markdown[0].value
    preview = app.dataframe[0].value
    assert list(preview["session"]) == ["paris", "lisbon"] and list(preview["new messages"]) == [4, 1]
    with Store(lab_db) as store:
        assert store.sessions.find("default", "openai-messages", "paris") is None  # the preview wrote nothing

    import_button(app).click().run()
    assert not app.exception, [e.message for e in app.exception]
    assert "added 5 messages" in app.success[0].value
    assert app.session_state["session_ref"] == ("default", "openai-messages", "paris")
    with Store(lab_db) as store:
        history = Session.open(store, "paris", agent_id="openai-messages").get_history()
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]


def test_the_same_file_again_has_nothing_new_and_a_grown_one_only_its_news(lab_db):
    app = upload(sessions_page(), "chats.jsonl", jsonl(CONVERSATIONS))
    import_button(app).click().run()
    app = upload(sessions_page(), "chats.jsonl", jsonl(CONVERSATIONS))
    assert any("in the store already" in info.value for info in app.info)
    assert not [b for b in app.button if b.key == "import_run"]

    grown = CONVERSATIONS[:1] + [{"id": "lisbon", "messages": CONVERSATIONS[1]["messages"] + [
        {"role": "assistant", "content": "21C."}]}]
    app = upload(sessions_page(), "chats-v2.jsonl", jsonl(grown))
    assert list(app.dataframe[0].value["status"]) == ["unchanged", "grew"]
    import_button(app).click().run()
    assert "added 1 messages" in app.success[0].value


def test_the_agent_can_be_chosen_and_a_sqlite_source_is_read_from_the_upload(lab_db, tmp_path):
    source = tmp_path / "not-memory.db"
    with sqlite3.connect(source) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    app = upload(sessions_page(), "not-memory.db", source.read_bytes())
    assert "not-memory.db: not a format memorylab imports" in app.error[0].value
    assert str(tmp_path) not in app.error[0].value

    app = upload(sessions_page(), "chats.jsonl", jsonl(CONVERSATIONS[1:]))
    app.text_input(key="import_agent").input("travel-bot").run()
    import_button(app).click().run()
    with Store(lab_db) as store:
        assert store.sessions.find("default", "travel-bot", "lisbon") is not None


def test_a_broken_file_is_refused_with_its_line_and_the_name_the_user_gave_it(lab_db):
    broken = jsonl(CONVERSATIONS) + b'{"id": "cut", "messages": [\n'
    app = upload(sessions_page(), "export-from-prod.jsonl", broken)
    assert app.error[0].value.startswith("export-from-prod.jsonl, line 3: not valid JSON")
    assert not [b for b in app.button if b.key == "import_run"]
    with Store(lab_db) as store:
        assert store.sessions.find("default", "openai-messages", "paris") is None


def test_an_uploaded_export_keeps_the_agent_it_names_and_refuses_its_namesake(lab_db, tmp_path):
    with Store(tmp_path / "other.db") as other:
        session = Session.create(other, "trip", agent_id="travel-bot")
        session.append_message({"id": "q", "role": "user", "content": "Porto or Lisbon?"})
        export = json.dumps(export_session(session)).encode()
    app = upload(sessions_page(), "trip.json", export)
    assert app.text_input(key="import_agent").value is None
    assert "memorylab session export" in app.markdown[0].value
    import_button(app).click().run()
    assert app.session_state["session_ref"] == ("default", "travel-bot", "trip")
    app = upload(sessions_page(), "trip.json", export)
    assert "session 'trip' already exists for agent 'travel-bot'" in app.error[0].value
