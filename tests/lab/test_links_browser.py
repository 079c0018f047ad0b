"""Deep links and the experiment draft in headless Chromium: a link opened in a fresh browser shows
what it names and survives a reload and back; a probe typed into a case's grid survives reruns; an
arm handed to the Compaction lab opens it at its top.
Screenshots go to ``screenshots/`` (or ``$MEMORYLAB_SCREENSHOTS``)."""
import os
import re
from pathlib import Path

import pytest

from memorylab import Store
from memorylab.experiments import Experiments
from tests.helpers import ROOT, browser_page
from tests.lab.test_experiments_page import offline_sample

SHOTS = Path(os.environ.get("MEMORYLAB_SCREENSHOTS", ROOT / "screenshots"))
TRIP = "tenant=default&agent=travel-planner&session=trip-planning-branches"
SCROLLED = "Math.max(window.scrollY, ...[...document.querySelectorAll('*')].map(element => element.scrollTop))"
"""How far the page is scrolled down, in pixels, whichever element scrolls it."""


@pytest.fixture
def lab_db(sample_lab_db):
    return sample_lab_db


@pytest.fixture
def page(browser, lab_server):
    yield from browser_page(browser)


def settled(page, text):
    page.get_by_text(text).first.wait_for(timeout=90_000)
    page.wait_for_function("!document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=60_000)
    page.wait_for_timeout(1000)
    assert page.locator("[data-testid='stException']").count() == 0


def idle(page):
    """Once the run an edit started has ended (Streamlit's running indicator gone)."""
    page.wait_for_timeout(500)
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)
    page.wait_for_timeout(500)


def active_branch(page):
    picker = page.locator("[data-testid='stSelectbox']").filter(has_text="Active branch")
    return picker.text_content() + " " + " ".join(box.input_value() for box in picker.locator("input").all())


def test_a_deep_link_opens_its_branch_in_a_fresh_browser_and_survives_reload_and_back(page, lab_server):
    page.goto(f"{lab_server}/tree?{TRIP}&leaf=m005")
    settled(page, "Active path")
    assert "m005 ·" in active_branch(page)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / "deep_link_tree.png")
    page.reload()
    settled(page, "Active path")
    assert "m005 ·" in active_branch(page) and "leaf=m005" in page.url
    page.get_by_role("button", name=re.compile("Add this branch as a case")).click()
    page.get_by_text("Open the draft on the Experiments page").click()
    settled(page, "Cases and probes")
    assert "experiment=" not in page.url and "leaf=m005" in page.url  # an unsaved draft has no link of its own
    page.go_back()  # one press: the jump carried the selection, so the page's run added no step of its own
    settled(page, "Active path")
    assert "m005 ·" in active_branch(page) and "/tree?" in page.url


def test_a_link_to_a_missing_session_says_so_in_the_browser(page, lab_server):
    page.goto(f"{lab_server}/tree?session=deleted-long-ago")
    settled(page, "Active path")
    page.get_by_text("which is not in").wait_for(timeout=30_000)
    assert "session=support-order-4471" in page.url
    page.screenshot(path=SHOTS / "deep_link_missing.png")


def test_a_probe_typed_into_the_new_drafts_grid_survives_its_reruns(page, lab_server):
    page.goto(f"{lab_server}/tree?{TRIP}&leaf=m005")
    settled(page, "Active path")
    page.get_by_role("button", name=re.compile("Add this branch as a case")).click()
    page.get_by_text("Open the draft on the Experiments page").click()
    settled(page, "Branch (by its leaf)")
    grid = page.locator("[data-testid='stDataFrame']").first
    for column, text in ((0.5, "How many days in Lisbon?"), (0.78, "3-day Lisbon plan")):  # question, facts
        grid.scroll_into_view_if_needed()
        box = grid.bounding_box()  # again: the rerun of an edit may move the grid
        assert box["height"] > 5 * 35  # room to type several probes
        page.mouse.dblclick(box["x"] + box["width"] * column, box["y"] + 38 + 17)  # the first row: blank
        page.locator("textarea.gdg-input").wait_for(timeout=10_000)  # the cell's editor is open
        page.keyboard.type(text, delay=20)
        page.keyboard.press("Enter")  # each edit reruns the page
        idle(page)
    page.screenshot(path=SHOTS / "experiment_probe_typed.png")
    page.get_by_role("tab", name="YAML").click()
    settled(page, "Download the spec")
    spec = page.locator("[data-testid='stCode']").first.inner_text()
    assert "How many days in Lisbon?" in spec and "3-day Lisbon plan" in spec, spec


def test_use_this_arm_opens_the_compaction_lab_at_its_top_with_the_arms_summarizer(page, lab_db, lab_server):
    with Store(lab_db) as store:
        Experiments(store).run(offline_sample("support"))
    page.goto(f"{lab_server}/experiments")
    settled(page, "Arm to tune further in the Compaction lab")
    button = page.get_by_role("button", name=re.compile("Use this arm in the Compaction lab"))
    button.scroll_into_view_if_needed()  # the button sits near the foot of a long results page
    page.mouse.move(800, 500)
    page.mouse.wheel(0, 20_000)  # and the reader went on to the very bottom
    page.wait_for_timeout(500)
    assert page.evaluate(SCROLLED) > 500
    button.click()
    settled(page, "Summary prompt template")
    title = page.get_by_role("heading", name="Compaction lab").first.bounding_box()
    page.screenshot(path=SHOTS / "use_this_arm_compaction_lab.png")
    assert 0 <= title["y"] < 300 and page.evaluate(SCROLLED) == 0, "the Compaction lab opened scrolled down"
    (scroller,) = [f for f in page.frames[1:] if "scrollTop" in f.evaluate("document.documentElement.outerHTML")]
    assert scroller.evaluate("window.parent.document.querySelector('[data-testid=stMainBlockContainer]') !== null")
    summarizer = page.locator("[data-testid='stSelectbox']").filter(has_text="Summarizer")
    assert "Extractive: no model" in summarizer.text_content() + " ".join(box.input_value() for box in
                                                                         summarizer.locator("input").all())
    assert page.get_by_role("textbox", name="Summarizer model").first.is_disabled()  # the preview's, not A/B's


def test_back_after_moving_through_the_menu_returns_one_page_a_press(page, lab_server):
    page.goto(f"{lab_server}/tree?{TRIP}")
    settled(page, "Active path")
    menu = page.locator("[data-testid='stSidebar'] [data-testid='stPageLink-NavLink']")
    for title, shows in (("Chat", "What the model sees"), ("Experiments", "No experiment in this store yet")):
        menu.filter(has_text=title).click()
        settled(page, shows)
        assert "session=trip-planning-branches" in page.url  # the menu kept the selection
    for title in ("Chat", "Tree"):
        page.go_back()
        page.get_by_role("heading", name=title).first.wait_for(timeout=30_000)
        assert "session=trip-planning-branches" in page.url
