"""The Audit page in headless Chromium, on a store holding a compacted Claude Code session: the lost
artifacts show, and one opens its message on the Tree."""
import pytest

from memorylab import Store, load_samples
from memorylab.importers import import_source
from tests.helpers import ROOT
from tests.lab.test_browser import SHOTS, open_page

COMPACTED = ROOT / "tests" / "data" / "claude_code" / "compacted.jsonl"


@pytest.fixture
def compacted_lab_db(lab_db):
    with Store(lab_db) as store:
        load_samples(store)
        import_source(store, COMPACTED)
    return lab_db


@pytest.fixture
def audit_server(compacted_lab_db, lab_server):
    return lab_server


def test_the_audit_page_shows_what_each_compaction_dropped(browser, audit_server):
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    open_page(page, audit_server, "", "Tokens (estimate)")
    open_page(page, audit_server, "audit", "Compactions, worst first", shot="audit_compacted")
    for lost in ("CHANGELOG.md", "httpkit/client.py", "3 times"):
        page.get_by_text(lost, exact=True).first.wait_for(timeout=30_000)
    assert page.get_by_text("Retention per kind of artifact").count() == 1
    page.get_by_role("button", name="Show message").first.click()
    page.get_by_text("Opened from the audit").wait_for(timeout=60_000)
    page.get_by_text("What this summary dropped").first.wait_for(timeout=30_000)
    assert page.locator("[data-testid='stException']").count() == 0
    page.screenshot(path=SHOTS / "audit_tree.png", full_page=True)
    page.close()
