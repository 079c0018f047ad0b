"""A pin's note is a short reason, on both backends: one over the limit is refused, whether it comes
from ``Session.pin`` or from an imported export, and nothing is stored."""
import pytest

from memorylab import ImportFormatError, InvalidInputError, NotFoundError, Session
from memorylab.history.pins import MAX_PIN_NOTE_CHARS
from memorylab.io import export_session, import_session
from tests.helpers import text_message


@pytest.fixture
def two_messages(session):
    session.append_message(text_message("m0", "The budget is 40k."))
    session.append_message(text_message("m1", "Noted.", "assistant"))
    return session


def test_a_note_at_the_limit_is_kept_and_one_over_it_is_refused(two_messages):
    assert two_messages.pin("m0", note="x" * MAX_PIN_NOTE_CHARS)["note"] == "x" * MAX_PIN_NOTE_CHARS
    with pytest.raises(InvalidInputError, match=f"at most {MAX_PIN_NOTE_CHARS:,} characters"):
        two_messages.pin("m1", note="x" * (MAX_PIN_NOTE_CHARS + 1))
    with pytest.raises(InvalidInputError, match="at most"):
        two_messages.pin("m0", note="y" * 10_000_000)  # pinning again may not grow it either
    assert [(pin["message_id"], len(pin["note"])) for pin in two_messages.get_pins()] == [("m0", MAX_PIN_NOTE_CHARS)]


def test_an_export_with_a_note_over_the_limit_is_refused_whole(store, two_messages):
    export = export_session(two_messages)
    export["pins"] = [{"message_id": "m0", "note": "x" * (MAX_PIN_NOTE_CHARS + 1)}]
    with pytest.raises(ImportFormatError, match=f"at most {MAX_PIN_NOTE_CHARS:,} characters"):
        import_session(store, export, session_id="copy")
    assert store.sessions.find("default", "default", "copy") is None
    with pytest.raises(NotFoundError):
        Session.open(store, "copy")
