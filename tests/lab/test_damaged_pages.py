"""A session whose newest message row was damaged behind the lab's back: every page that draws the
session still renders, says which message it left out, and shows the rest."""
import sqlite3

import pytest
from streamlit.testing.v1 import AppTest

from memorylab import Session, Store
from tests.helpers import ROOT

SESSION = ("default", "support-bot", "support-order-4471")
pytestmark = pytest.mark.filterwarnings("ignore::memorylab.errors.DamagedRowWarning")  # expected here


@pytest.fixture
def damaged_lab_db(sample_lab_db):
    with Store(sample_lab_db) as store:
        newest = Session.open(store, SESSION[2], agent_id=SESSION[1]).get_latest_leaf_id()
    with sqlite3.connect(sample_lab_db) as conn:
        conn.execute("UPDATE messages SET parts = '[{\"type\": \"te' WHERE id = ?", (newest,))
    return newest


@pytest.mark.parametrize("page", ["chat.py", "tree.py", "compaction_lab.py", "context_window.py"])
def test_a_page_on_a_session_with_a_damaged_newest_message_says_so_and_renders(damaged_lab_db, page):
    app = AppTest.from_file(str(ROOT / "app_pages" / page), default_timeout=60)
    app.session_state["session_ref"] = SESSION
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    warnings = [w.value for w in app.warning]
    assert any(f"message {damaged_lab_db!r}: its stored parts is not readable JSON" in w for w in warnings), warnings
