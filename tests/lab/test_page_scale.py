"""The long-session pages reuse what they read between reruns (the branch, plans, budgets), and what
they reuse never hides a change: a new message, a new or removed overlay, a turn, an edit."""
import pytest

from lab_ui.store import lab_session
from memorylab import Session, Store
from memorylab.history.budget import request_breakdown
from tests.helpers import confirm_in_dialog, text_message
from tests.lab.test_pages import run_page

REF = ("default", "default", "long-chat")
MESSAGES = 300


@pytest.fixture
def long_chat(sample_lab_db):
    with Store(sample_lab_db) as store:
        session = Session.create(store, REF[2])
        for number in range(MESSAGES):
            session.append_message(text_message(f"m{number}", f"message number {number}",
                                                 "user" if number % 2 == 0 else "assistant"))
    return sample_lab_db


def drawn(app):
    return [m.markdown[0].value for m in app.chat_message if m.markdown]


def change(lab_db, action):
    with Store(lab_db) as store:
        return action(Session.open(store, REF[2]))


def test_the_chat_draws_its_window_without_an_editor_or_the_request_per_message(long_chat):
    app = run_page("chat.py", session_ref=REF)
    assert len(app.chat_message) == 50
    assert not [t for t in app.text_area if (t.key or "").startswith("edit_text_")]  # editors open on demand
    assert not app.json  # the request preview converts the branch only when it is opened
    app.session_state["chat_request_preview"] = True
    app.run()
    (preview,) = app.json
    assert "message number 0" in preview.value and "message number 299" in preview.value


def test_a_message_or_overlay_added_elsewhere_shows_on_the_next_rerun(long_chat):
    app = run_page("chat.py", session_ref=REF)
    assert drawn(app)[-1] == "message number 299"
    change(long_chat, lambda session: session.append_message(text_message("m300", "written by another process")))
    app.run()
    assert drawn(app)[-1] == "written by another process" and len(app.chat_message) == 50
    overlay = change(long_chat, lambda session: session.add_compaction("Everything so far.", "m0", "m290"))
    app.run()
    assert drawn(app)[0] == "Everything so far." and len(app.chat_message) == 11
    assert any("standing in for 291 earlier messages" in c.value for c in app.caption)
    change(long_chat, lambda session: session.remove_compaction(overlay["id"]))
    app.run()
    assert drawn(app)[0] == "message number 251"


def test_a_streamed_turn_a_regeneration_and_an_edit_show_at_once(long_chat):
    app = run_page("chat.py", session_ref=REF, completion_kwargs={"mock_response": "Answered."})
    app.chat_input[0].set_value("One more question").run()
    assert not app.exception, [e.message for e in app.exception]
    assert drawn(app)[-2:] == ["One more question", "Answered."]
    answer = app.session_state["leaf_id"]
    app.button(key=f"regen_{answer}").click().run()
    assert not app.exception and app.session_state["leaf_id"] != answer
    assert drawn(app)[-2:] == ["One more question", "Answered."]
    assert any("branch 2/2" in c.value for c in app.caption)
    app.session_state["edit_m298"] = True  # the popover opened
    app.run()
    app.text_area(key="edit_text_m298").set_value("Asked differently")
    app.button(key="fork_m298").click().run()
    assert not app.exception, [e.message for e in app.exception]
    assert drawn(app)[-2:] == ["Asked differently", "Answered."]


def test_the_context_window_answers_each_setting_and_follows_new_messages(long_chat):
    app = run_page("context_window.py", session_ref=REF)

    def shown():
        return {(p, i): t for p, i, t in app.dataframe[0].value[["part", "item", "tokens"]].itertuples(index=False)}

    def expected(keep_recent):
        with Store(long_chat) as store:  # read afresh, with the lab's context blocks as the page has them
            return {(r["part"], r["item"]): r["tokens"] for r in request_breakdown(
                lab_session(store, REF), micro_compaction={"keep_recent": keep_recent})}

    assert shown() == expected(4)
    app.number_input[2].set_value(0).run()
    assert shown() == expected(0)
    before = shown()[("messages", "user messages")]
    change(long_chat, lambda session: session.append_message(text_message("m300", "one more " * 50)))
    app.run()
    assert shown()[("messages", "user messages")] > before and shown() == expected(0)


def test_the_compaction_lab_shows_an_accepted_overlay_and_its_undo_at_once(long_chat):
    app = run_page("compaction_lab.py", session_ref=REF,
                   completion_kwargs={"mock_response": "## Topic\nA long chat."})
    app.number_input(key="main_tail").set_value(500).run()
    summarized = app.metric[2].value
    [b for b in app.button if b.label == "Run the summarizer"][0].click().run()
    [b for b in app.button if b.label.startswith("Accept")][0].click().run()
    confirm_in_dialog(app, "accept_summary")
    assert not app.exception, [e.message for e in app.exception]
    assert any("visible on this branch" in m.value for m in app.markdown)
    assert any(i.value.startswith("Nothing to compact") for i in app.info)  # only the new summary is between
    [b for b in app.button if b.label == "Undo"][0].click().run()
    confirm_in_dialog(app, "undo_1")
    assert any("No overlays on this session yet." in i.value for i in app.info)
    assert app.metric[2].value == summarized
