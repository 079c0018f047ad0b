"""The Tree page marks the messages of tool-pair findings and lists them, each with a button that
makes its branch active."""
import json

import pytest

from memorylab import Session, Store
from memorylab.display.viz import FLAGGED_OUTLINE
from tests.helpers import run_app_page, text_message

REF = ("default", "default", "tools")


@pytest.fixture
def tools_lab_db(sample_lab_db):
    """Session "tools": u1 - a1 (calls c1) - t1 (its result) - a2, and a side branch under u1 whose
    t9 answers c1 without its call."""
    with Store(sample_lab_db) as store:
        session = Session.create(store, "tools")
        session.append_message(text_message("u1", "read the file"), parent_id=None)
        session.append_message({"id": "a1", "role": "assistant", "parts": [
            {"type": "tool-read", "toolCallId": "c1", "toolName": "read", "input": {}, "state": "input-available"}]})
        session.append_message({"id": "t1", "role": "tool", "parts": [
            {"type": "tool-read", "toolCallId": "c1", "toolName": "read", "output": "x", "state": "output-available"}]})
        session.append_message(text_message("a2", "done", role="assistant"))
        session.append_message({"id": "t9", "role": "tool", "parts": [
            {"type": "tool-read", "toolCallId": "c1", "toolName": "read", "output": "x", "state": "output-available"}]},
            parent_id="u1")
        session.append_message(text_message("b2", "done too", role="assistant"))
    return sample_lab_db


def tree_page(**state):
    return run_app_page("app_pages/tree.py", **{"session_ref": REF, **state})


def outlined(app):
    """{node id: outline colour} of every drawn message."""
    spec = json.loads(app.get("plotly_chart")[0].proto.spec)
    return {node: color for trace in spec["data"] if "customdata" in trace
            for node, color in zip(trace["customdata"], trace["marker"]["line"]["color"])}


def test_the_orphaned_result_is_outlined_and_listed_with_a_button_to_its_branch(tools_lab_db):
    app = tree_page(leaf_id="a2")
    colors = outlined(app)
    assert colors["t9"] == FLAGGED_OUTLINE
    assert [node for node, color in colors.items() if color == FLAGGED_OUTLINE] == ["t9"]
    [listing] = [e for e in app.expander if e.label.startswith("Tool-pair problems (1)")]
    assert any("delete the result in t9" in t.value for t in app.text)
    listing.button[0].click().run()
    assert not app.exception
    assert app.session_state["leaf_id"] == "b2"
    assert list(app.dataframe[0].value["id"]) == ["u1", "t9", "b2"]


def test_a_session_without_problems_shows_no_marks_or_listing(sample_lab_db):
    app = run_app_page("app_pages/tree.py", session_ref=("default", "code-helper", "coding-csv-importer"))
    assert FLAGGED_OUTLINE not in outlined(app).values()
    assert not [e for e in app.expander if e.label.startswith("Tool-pair problems")]


def test_the_legend_keys_roles_in_their_colours_and_the_problem_outline_apart(tools_lab_db):
    from memorylab.display.viz import ROLE_COLORS

    spec = json.loads(tree_page().get("plotly_chart")[0].proto.spec)
    keys = {trace["name"]: trace["marker"] for trace in spec["data"] if trace.get("showlegend", True)}
    for role in ("user", "assistant", "tool"):  # a role's first node may be on the active path, or outlined
        assert keys[role]["color"] == ROLE_COLORS[role] and keys[role]["line"]["color"] == "white"
    assert keys["tool-pair problem"]["line"]["color"] == FLAGGED_OUTLINE
