"""Pins from the lab (set and cleared on the Chat and Tree pages, shown there and in the Compaction lab),
and the Chat page's prompt-cache line under each turn it sent."""
from memorylab import Session, Store
from tests.helpers import text_message
from tests.lab.test_pages import run_page

REF = ("default", "default", "pins-chat")


def seeded(lab_db, count=30):
    with Store(lab_db) as store:
        session = Session.create(store, REF[2])
        for number in range(count):
            session.append_message(text_message(f"m{number}", f"message number {number} " + "detail " * 40,
                                                "user" if number % 2 == 0 else "assistant"))


def pins(lab_db):
    with Store(lab_db) as store:
        return [pin["message_id"] for pin in Session.open(store, REF[2]).get_pins()]


def test_chat_pins_and_unpins_a_message(lab_db):
    seeded(lab_db)
    app = run_page("chat.py", session_ref=REF)
    app.button(key="pin_m12").click().run()
    assert not app.exception, [e.message for e in app.exception]
    assert pins(lab_db) == ["m12"]
    pinned = next(m for m in app.chat_message if any("message number 12 " in md.value for md in m.markdown))
    assert any("Pinned" in caption.value for caption in pinned.caption)
    assert app.button(key="pin_m12").proto.type == "primary"
    app.button(key="pin_m12").click().run()
    assert pins(lab_db) == []


def test_tree_pins_the_selected_message_with_a_note_and_marks_it(lab_db):
    seeded(lab_db)
    app = run_page("tree.py", session_ref=REF, leaf_id="m7")
    app.text_input(key="tree_pin_note").set_value("the user's budget")
    app.button(key="tree_pin_selected").click().run()
    assert not app.exception, [e.message for e in app.exception]
    with Store(lab_db) as store:
        assert Session.open(store, REF[2]).get_pins()[0]["note"] == "the user's budget"
    assert any(expander.label.startswith("📌 Pins (1)") for expander in app.expander)
    figure = app.get("plotly_chart")[0].proto.spec
    assert "📌" in figure
    app.button(key="tree_unpin_selected").click().run()
    assert pins(lab_db) == []


def test_unpinning_selected_rows_never_reaches_a_pin_that_moved_into_their_place(lab_db):
    seeded(lab_db)
    with Store(lab_db) as store:
        for message_id in ("m3", "m5", "m7"):
            Session.open(store, REF[2]).pin(message_id)
    app = run_page("tree.py", session_ref=REF, leaf_id="m29")
    listed = list(app.dataframe(key="tree_pins_table").value["message"])
    app.session_state["tree_pins_table"] = {"selection": {"rows": [1, 2], "columns": []}}
    app.run()
    app.button(key="tree_unpin_rows").click().run()
    assert not app.exception, [e.message for e in app.exception]
    assert pins(lab_db) == [listed[0]]
    (unpin,) = [b for b in app.button if b.key == "tree_unpin_rows"]
    assert unpin.disabled  # rows 1 and 2 are gone: nothing is selected, not the pin that is now row 0


def test_compaction_lab_keeps_a_pinned_message_out_of_the_summary(lab_db):
    seeded(lab_db)
    with Store(lab_db) as store:
        Session.open(store, REF[2]).pin("m12")
    app = run_page("compaction_lab.py", session_ref=REF)
    assert any("pinned message(s) in this span" in info.value for info in app.info)
    prompt = next(code.value for code in app.code if "Messages to summarize" in code.value)
    assert "message number 12 " not in prompt and "message number 11 " in prompt


def test_chat_shows_each_recorded_turns_prompt_cache(lab_db):
    seeded(lab_db, count=4)
    app = run_page("chat.py", session_ref=REF, completion_kwargs={"mock_response": "Noted."})
    app.chat_input[0].set_value("First question").run()
    app.chat_input[0].set_value("Second question").run()
    assert not app.exception, [e.message for e in app.exception]
    captions = [c.value for m in app.chat_message for c in m.caption if c.value.startswith("cache:")]
    assert len(captions) == 2, captions  # the seeded answers were not sent by a runner: no caption
    assert "a cached prefix" in captions[-1] and not captions[-1].startswith("cache: 0 of")
