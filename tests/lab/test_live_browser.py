"""The live pages in headless Chromium: a message another process writes shows without a reload, what
the user is typing stays, and a paused page waits.

Screenshots go to ``screenshots/`` (or ``$MEMORYLAB_SCREENSHOTS``), as in test_browser.py.
"""
import subprocess
import sys

import pytest

from memorylab import Store, load_samples
from tests.helpers import ROOT, browser_page, serve_lab
from tests.lab.test_browser import SHOTS, open_page

SESSION, AGENT = "support-order-4471", "support-bot"
TYPED = "a question I have not sent yet"


@pytest.fixture
def live_lab(lab_db):
    with Store(lab_db) as store:
        load_samples(store)
    yield from serve_lab(lab_db)


@pytest.fixture
def page(browser, live_lab):
    yield from browser_page(browser)


def append_elsewhere(db, text):
    """Append a user message to the session from another process, as ``memorylab watch`` would."""
    script = ("import sys; from memorylab import Session, Store\n"
              "with Store(sys.argv[1]) as store:\n"
              f"    Session.open(store, {SESSION!r}, agent_id={AGENT!r}).append_message("
              "{'role': 'user', 'content': sys.argv[2]})")
    subprocess.run([sys.executable, "-c", script, str(db), text], check=True, cwd=ROOT)


def test_the_chat_shows_a_message_written_elsewhere_and_keeps_what_the_user_types(page, live_lab, lab_db):
    open_page(page, live_lab, "chat", "What the model sees", shot="chat_live")
    assert page.get_by_text("Live: checking for new messages").count() == 1
    box = page.get_by_test_id("stChatInputTextArea")
    box.fill(TYPED)
    append_elsewhere(lab_db, "Written by the agent while the lab was open")
    page.get_by_text("Written by the agent while the lab was open").first.wait_for(timeout=5_000)
    assert box.input_value() == TYPED
    page.screenshot(path=SHOTS / "chat_live_arrived.png", full_page=True)


def test_a_paused_page_waits_and_the_tree_follows_once_live_again(page, live_lab, lab_db):
    open_page(page, live_lab, "tree", "Active path", shot="tree_live")
    page.get_by_text("Live", exact=True).click()
    page.get_by_text("Paused: new messages show").wait_for(timeout=10_000)
    count = page.get_by_test_id("stMetricValue").first  # the tree's "Messages"
    before = int(count.inner_text())
    append_elsewhere(lab_db, "Written while paused")
    page.wait_for_timeout(3_000)
    assert int(count.inner_text()) == before
    page.screenshot(path=SHOTS / "tree_paused.png", full_page=True)
    page.get_by_text("Live", exact=True).click()
    page.get_by_text("Live: checking for new messages").wait_for(timeout=10_000)
    page.wait_for_function("n => document.querySelector('[data-testid=stMetricValue]').innerText == String(n)",
                           arg=before + 1, timeout=10_000)
    page.screenshot(path=SHOTS / "tree_live_again.png", full_page=True)
