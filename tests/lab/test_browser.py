"""The running lab in headless Chromium: every page renders, user content stays text.

Screenshots go to ``screenshots/`` (or ``$MEMORYLAB_SCREENSHOTS``) as test artifacts.
"""
import os
import re
from pathlib import Path

import pytest

from memorylab import Session, Store, load_samples
from tests.helpers import PAGES, ROOT, serve_lab

SHOTS = Path(os.environ.get("MEMORYLAB_SCREENSHOTS", ROOT / "screenshots"))
TITLES = re.findall(r'title="([^"]+)"', (ROOT / "app.py").read_text())
HOSTILE = "<img src=x onerror=alert(1)> <script>alert('xss')</script> **not bold**"

@pytest.fixture
def seeded_lab_db(lab_db):
    """The lab database with the samples and a hostile message as the newest turn of the first session."""
    with Store(lab_db) as store:
        load_samples(store)
        Session.open(store, "support-order-4471", agent_id="support-bot").append_message(
            {"role": "user", "content": HOSTILE})
    return lab_db


@pytest.fixture
def page(browser, seeded_lab_db, lab_server):
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.dialogs = dialogs
    yield page
    page.close()


def open_page(page, base, path, expected, shot=None):
    page.goto(f"{base}/{path}")
    page.get_by_text(expected).first.wait_for(timeout=60_000)
    # Charts and tables draw after the text: wait for the first of each before the screenshot.
    for element, drawn in (("stPlotlyChart", ".main-svg"), ("stDataFrame", "canvas")):
        shown = page.locator(f"[data-testid='{element}']:visible")
        if shown.count():
            shown.first.locator(drawn).first.wait_for(timeout=30_000)
    page.wait_for_timeout(700)
    assert page.locator("[data-testid='stException']").count() == 0, f"/{path} shows an exception"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / f"{shot or path or 'sessions'}.png", full_page=True)


def test_every_page_renders_in_the_browser(page, lab_server):
    for path, expected in PAGES.items():
        open_page(page, lab_server, path, expected)
    assert page.dialogs == []


def test_a_deep_link_opened_first_lists_only_the_apps_pages_in_the_sidebar(page, lab_server):
    # The first request after start-up, straight to a page: nothing has run app.py's navigation yet.
    open_page(page, lab_server, "audit", "What each compaction forgot", shot="audit_deep_link")
    links = page.locator("[data-testid='stSidebar'] [data-testid='stPageLink-NavLink']")  # the lab's menu
    links.nth(len(TITLES) - 1).wait_for(timeout=30_000)
    assert sorted(text.splitlines()[-1].strip() for text in links.all_inner_texts()) == sorted(TITLES)
    page.screenshot(path=SHOTS / "audit_deep_link.png", full_page=True)


def test_html_in_a_message_renders_as_text_and_runs_nothing(page, lab_server):
    open_page(page, lab_server, "", "Tokens (estimate)")
    open_page(page, lab_server, "chat", "What the model sees")
    page.get_by_text("onerror=alert(1)", exact=False).first.wait_for(timeout=30_000)
    assert page.locator("img[src='x']").count() == 0
    assert page.locator("[data-testid='stChatMessage'] script").count() == 0
    page.wait_for_timeout(500)
    assert page.dialogs == []
    open_page(page, lab_server, "search", "Type words to search")
    page.get_by_role("textbox", name="Search").fill("onerror")
    page.keyboard.press("Enter")
    page.get_by_text("Open in tree").first.wait_for(timeout=30_000)
    assert page.locator("img[src='x']").count() == 0
    page.screenshot(path=SHOTS / "search_hostile.png", full_page=True)
    assert page.dialogs == []


@pytest.fixture
def postgres_lab(postgres_url):
    """The lab served from a PostgreSQL database holding the samples."""
    with Store(postgres_url) as store:
        load_samples(store)
    yield from serve_lab(postgres_url)


def test_the_lab_runs_on_a_postgres_store(browser, postgres_lab):
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    open_page(page, postgres_lab, "", "Tokens (estimate)", shot="postgres_sessions")
    assert page.get_by_text("postgresql://", exact=False).count() > 0
    open_page(page, postgres_lab, "tree", "Active path", shot="postgres_tree")
    open_page(page, postgres_lab, "search", "Type words to search", shot="postgres_search")
    page.get_by_role("textbox", name="Search").fill("refund")
    page.keyboard.press("Enter")
    page.get_by_text("Open in tree").first.wait_for(timeout=30_000)
    assert page.locator("[data-testid='stException']").count() == 0
    page.screenshot(path=SHOTS / "postgres_search.png", full_page=True)
    page.close()


def test_a_claude_code_transcript_uploaded_in_the_browser_imports_with_its_overlays(page, lab_server, lab_db):
    transcript = ROOT / "tests" / "data" / "claude_code" / "compacted.jsonl"
    open_page(page, lab_server, "", "Tokens (estimate)")
    page.get_by_text("Import agent memory").click()
    page.locator("input[type='file']").set_input_files(str(transcript))
    page.get_by_text("Claude Code session transcript (JSONL)").first.wait_for(timeout=60_000)
    page.get_by_role("button", name="Import 10 messages").click()
    page.get_by_text("added 10 messages and 2 overlays").wait_for(timeout=60_000)
    assert page.locator("[data-testid='stException']").count() == 0
    page.screenshot(path=SHOTS / "import_done.png", full_page=True)
    with Store(lab_db) as store:
        (row,) = store.sessions.list(agent_id="claude-code")
        session = Session.open(store, row["session_id"], agent_id="claude-code")
        assert len(session.get_compactions()) == 2
        assert session.get_history()[0]["id"].startswith("compaction_")
