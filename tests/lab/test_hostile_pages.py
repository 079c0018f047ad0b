"""Hostile text in every place a user or a model can write it, shown by the running lab in Chromium:
always as text, never as live HTML or script."""
import pytest

from memorylab import KVStore, Memory, Session, SqliteSearchProvider, Store, register_agent
from memorylab.samples import load_samples
from tests.helpers import PAGES

IMG = "<img src=x onerror=alert(1)>"
SHOWN_AS_TEXT = {"", "chat", "context_blocks", "compaction_lab"}
"""Pages that show the hostile text in the DOM; the others draw it on canvases (tables, charts) or not at all."""
HTML = f'{IMG}<script>alert(2)</script><a href="javascript:alert(3)">link</a>'


@pytest.fixture
def hostile_lab_db(lab_db):
    """The samples, with HTML in everything a user or a model can write: message text, tool output,
    session title and id, agent name, block content, overlay summary, status, KV, search entries."""
    with Store(lab_db) as store:
        load_samples(store)
        session = Session.open(store, "support-order-4471", agent_id="support-bot")
        session.set_metadata({**session.info["metadata"], "title": HTML})
        session.with_context("memory").replace_context_block("memory", HTML)
        first = session.get_history(apply_compactions=False)[0]["id"]
        session.append_message({"role": "assistant", "parts": [
            {"type": "text", "text": HTML}, {"type": "tool-lookup", "toolCallId": "c1", "toolName": "lookup",
                                            "input": {"q": HTML}, "output": HTML, "state": "output-available"}]})
        session.add_compaction(HTML, first, session.get_latest_leaf()["parent_id"])
        Session.create(store, HTML, agent_id="support-bot").append_message({"role": "user", "content": HTML})
        register_agent(store, "support-bot", name=HTML)
        Memory(store, agent_id="support-bot").set_status(IMG, key=HTML)
        KVStore(store).set(HTML, {"html": HTML})
        SqliteSearchProvider(store).set(HTML, HTML)
    return lab_db


def test_every_page_shows_html_from_users_as_text(browser, hostile_lab_db, lab_server):
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    for path, expected in PAGES.items():
        page.goto(f"{lab_server}/{path}")
        page.get_by_text(expected).first.wait_for(timeout=60_000)
        if path in SHOWN_AS_TEXT:  # wait until the page body (not just the sidebar) shows the text
            body = page.locator("[data-testid='stMainBlockContainer']")
            body.get_by_text("onerror=alert(1)", exact=False).first.wait_for(state="attached", timeout=30_000)
        page.wait_for_timeout(500)
        assert page.locator("[data-testid='stException']").count() == 0, f"/{path} shows an exception"
        injected = page.locator("img[src='x'], a[href^='javascript:'], [onerror]").count()
        assert injected == 0, f"/{path} turned user text into {injected} live element(s)"
        assert dialogs == [], f"/{path} ran a script"
    page.close()
