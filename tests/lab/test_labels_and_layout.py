"""The small things a new user trips over: labels in the project's own words, distinct page names,
the chat input pinned at the bottom, the replay comparison within the page's width, and buttons that
say what they do in text (an emoji alone renders blank where no emoji font is installed)."""
import re

import pytest

from memorylab.experiments import STRATEGY_HELP
from tests.helpers import ROOT
from tests.lab.test_pages import run_page

TRIP = ("default", "travel-planner", "trip-planning-branches")
TITLES = re.findall(r'title="([^"]+)"', (ROOT / "app.py").read_text())
COLUMN_PIXELS = {"small": 75, "medium": 200, "large": 400}
MAIN_AREA = 900
"""Pixels a wide page's main area has beside the sidebar in a 1400-pixel window."""


@pytest.fixture
def lab_db(sample_lab_db):
    return sample_lab_db


def test_page_names_are_distinct_none_inside_another():
    words = {title: set(title.lower().split()) for title in TITLES}
    assert len(set(TITLES)) == len(TITLES)
    assert [(a, b) for a in TITLES for b in TITLES if a != b and words[a] <= words[b]] == []
    assert "Memory manager" in TITLES


def test_strategy_help_is_in_the_projects_words():
    assert not [text for text in STRATEGY_HELP.values() if re.search(r"\bseed\b", text, re.IGNORECASE)]


def descendants(block):
    for child in getattr(block, "children", {}).values():
        yield child
        yield from descendants(child)


def test_the_chat_input_is_pinned_at_the_bottom_not_inside_the_page(lab_db):
    app = run_page("chat.py", session_ref=TRIP)
    main = app._tree.children[0]
    assert app.chat_input, "the chat page has no input"
    assert not [e for e in descendants(main) if type(e).__name__ == "ChatInput"]


def test_every_chat_button_says_what_it_does_in_text(lab_db):
    app = run_page("chat.py", session_ref=TRIP)
    labels = [b.label for b in app.button] + [p.proto.popover.label for p in app.get("popover")]
    assert {"Pin", "Regenerate", "Edit", "Add a probe", "Previous", "Next"} <= set(labels)
    assert [label for label in labels if not re.search(r"[A-Za-z]", label)] == []


def test_the_replay_comparison_fits_the_main_area_side_by_side(lab_db):
    app = run_page("chat.py", session_ref=TRIP, replay_compare_open=True)
    (table,) = [frame for frame in app.dataframe if "answer_b" in frame.value.columns]
    widths = re.findall(r'"width":\s*"(\w+)"', table.proto.columns)
    assert len(widths) == len(table.value.columns)
    assert sum(COLUMN_PIXELS[width] for width in widths) <= MAIN_AREA
