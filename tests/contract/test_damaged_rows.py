"""A message row damaged behind the engine's back costs that message, not its session: reads skip
it with a warning naming it, a direct read says what is wrong, and `memorylab check` lists it."""
import pytest

from memorylab import Session
from memorylab.check import check_database
from memorylab.errors import DamagedRowError, DamagedRowWarning
from memorylab.io import export_session

from tests.helpers import ids, text_message

DAMAGE = {
    "unreadable parts": ("parts", '[{"type": "text", "te', "parts is not readable JSON"),
    "parts holding a number": ("parts", "42", "parts is a JSON int, not a list"),
    "metadata holding a list": ("metadata", "[1, 2]", "metadata is a JSON list, not a dict"),
}


@pytest.fixture(params=list(DAMAGE))
def damaged(request, store):
    """Session "s1": m1 - m2 - m3 - m4 with m2's row damaged; session "s2" untouched."""
    session = Session.create(store, "s1")
    for number in range(1, 5):
        session.append_message(text_message(f"m{number}", f"words of m{number}"))
    Session.create(store, "s2").append_message(text_message("o1", "words of another session"))
    column, value, problem = DAMAGE[request.param]
    with store.transaction() as conn:
        conn.execute(f"UPDATE messages SET {column} = ? WHERE id = 'm2'", (value,))
    return session, problem


def test_history_leaves_the_damaged_message_out_and_warns_naming_it(damaged):
    session, problem = damaged
    with pytest.warns(DamagedRowWarning, match=f"session 's1': skipped message 'm2': its stored {problem}"):
        history = session.get_history()
    assert ids(history) == ["m1", "m3", "m4"]
    with pytest.warns(DamagedRowWarning):
        assert ids(session.get_all_messages()) == ["m1", "m3", "m4"]
    with pytest.warns(DamagedRowWarning):
        assert ids(session.get_branches("m1")) == []
    assert ids(Session.open(session.store, "s2").get_history()) == ["o1"]


def test_reading_the_damaged_message_itself_says_which_row_and_what_is_wrong(damaged):
    session, problem = damaged
    with pytest.raises(DamagedRowError, match=f"session 's1', message 'm2': its stored {problem}"):
        session.get_message("m2")


def test_the_session_keeps_working_around_the_damage(damaged):
    session, _ = damaged
    session.append_message(text_message("m5", "after the damage"))
    session.append_message(text_message("b1", "a branch under the damaged message"), parent_id="m2")
    with pytest.warns(DamagedRowWarning):
        assert ids(session.get_history("b1")) == ["m1", "b1"]
    assert [hit["id"] for hit in session.search("damage")] == ["m5", "b1"]


def test_an_export_leaves_the_damaged_message_out_and_says_so(damaged):
    session, _ = damaged
    with pytest.warns(DamagedRowWarning, match="'m2'"):
        exported = export_session(session)
    assert ids(exported["messages"]) == ["m1", "m3", "m4"]


def test_check_names_the_damaged_message_and_its_session(damaged):
    session, problem = damaged
    [finding] = check_database(session.store).findings
    assert finding.check == "readable" and finding.severity == "error"
    assert f"message 'm2': its stored {problem}" in finding.message
    assert "in session 's1'" in finding.message
