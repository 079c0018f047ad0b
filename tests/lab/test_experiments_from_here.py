"""Building an experiment on your own sessions from where you are: an empty "New experiment", "Add
this branch as a case" on the Chat and Tree pages, "Add a probe from this message", and a case whose
leaf is a message inside a branch."""
import pytest
from streamlit.testing.v1 import AppTest

from memorylab import Session, Store
from tests.helpers import ROOT

TRIP = ("default", "travel-planner", "trip-planning-branches")


@pytest.fixture
def lab_db(sample_lab_db):
    return sample_lab_db


def run(app):
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def open_app(page, **state):
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for key, value in state.items():
        app.session_state[key] = value
    app.switch_page(f"app_pages/{page}.py")
    return run(app)


def go_to_experiments(app):
    app.switch_page("app_pages/experiments.py")
    return run(app)


def cases(app):
    return app.session_state["exp_draft"]["spec"]["cases"]


def test_new_experiment_starts_empty(lab_db):
    app = open_app("experiments")
    (start,) = [b for b in app.button if b.label == "Start an empty experiment"]
    start.click()
    run(app)
    assert app.session_state["exp_choice"] == "New experiment"
    spec = app.session_state["exp_draft"]["spec"]
    assert (spec["name"], spec["arms"], spec["cases"]) == ("my-experiment", [], [])
    app.session_state["exp_tab"] = "Cases and probes"
    run(app)
    assert any("No cases yet" in info.value for info in app.info)


def test_a_draft_missing_arms_cases_or_probes_says_what_to_add_next_instead_of_an_error(lab_db):
    app = open_app("experiments")
    (start,) = [b for b in app.button if b.label == "Start an empty experiment"]
    start.click()
    run(app)
    assert not app.error
    (hint,) = [info.value for info in app.info if info.value.startswith("Next: ")]
    assert "**Arms**" in hint and "**Cases and probes**" in hint and "probe for" not in hint
    app = open_app("tree", session_ref=TRIP)
    app.button(key="tree_add_case").click()
    run(app)
    go_to_experiments(app)
    assert not app.error
    (hint,) = [info.value for info in app.info if info.value.startswith("Next: ")]
    assert "**Arms**" in hint and r"probe for “trip\-planning\-branches”" in hint


def test_add_this_branch_on_the_tree_puts_it_in_a_new_draft_the_experiments_page_opens_on(lab_db):
    with Store(lab_db) as store:
        oldest = Session.open(store, TRIP[2], agent_id=TRIP[1]).get_leaves()[-1]["id"]
    app = open_app("tree", session_ref=TRIP, leaf_id=oldest)
    app.button(key="tree_add_case").click()
    run(app)
    assert r"case “trip\-planning\-branches” of the draft “my\-experiment”" in app.success[0].value
    app.button(key="tree_add_case").click()  # the same branch again: still one case
    run(app)
    assert cases(app) == [{"name": "trip-planning-branches", "session": TRIP[2], "agent": TRIP[1],
                           "tenant": TRIP[0], "leaf": oldest, "probes": []}]
    go_to_experiments(app)
    assert app.session_state["exp_choice"] == "New experiment" and app.session_state["exp_tab"] == "Cases and probes"
    leaf = next(box for box in app.selectbox if box.label == "Branch (by its leaf)")
    assert leaf.value.startswith(f"{oldest} · ")


def test_a_probe_from_a_chat_message_has_its_text_as_the_fact_and_joins_a_saved_experiments_draft(lab_db):
    app = open_app("experiments")
    app.session_state["exp_open"] = "New from the sample spec"
    run(app)
    sample_cases = len(cases(app))
    app.switch_page("app_pages/chat.py")
    app.session_state["session_ref"] = TRIP
    run(app)
    message = next(m for m in Session.open(Store(lab_db), TRIP[2], agent_id=TRIP[1]).get_history()
                   if m["role"] == "assistant")
    app.session_state[f"probe_{message['id']}"] = True  # the popover opened
    run(app)
    fact = app.text_area(key=f"probe_fact_{message['id']}")
    assert fact.value == message["parts"][0]["text"]
    assert app.button(key=f"probe_add_{message['id']}").disabled  # no question yet
    app.text_input(key=f"probe_question_{message['id']}").input("Which days are planned?")
    fact.input("3-day Lisbon plan")
    run(app)
    app.button(key=f"probe_add_{message['id']}").click()
    run(app)
    assert r"case “trip\-planning\-branches” of the draft “sample”, with 1 probe." in app.success[0].value
    assert app.session_state["exp_draft"]["origin"] == "sample" and len(cases(app)) == sample_cases + 1
    assert cases(app)[-1]["probes"] == [{"id": "probe-1", "kind": "recall", "question": "Which days are planned?",
                                         "facts": ["3-day Lisbon plan"]}]
    go_to_experiments(app)
    assert app.session_state["exp_choice"] == "New from the sample spec"


def test_a_cases_leaf_inside_a_branch_is_not_called_gone(lab_db):
    with Store(lab_db) as store:
        history = Session.open(store, TRIP[2], agent_id=TRIP[1]).get_history()
    inside = history[2]["id"]  # a message with children: no leaf, but in the session
    app = open_app("tree", session_ref=TRIP, leaf_id=inside)
    app.button(key="tree_add_case").click()
    run(app)
    go_to_experiments(app)
    leaf = next(box for box in app.selectbox if box.label == "Branch (by its leaf)")
    assert leaf.value.startswith(f"{inside} · ")
    assert "not in the session any more" not in leaf.value and "inside a branch" in leaf.value


def test_the_sample_specs_cases_show_their_leaves_as_present(lab_db):
    app = open_app("experiments", exp_open="New from the sample spec")
    app.session_state["exp_tab"] = "Cases and probes"
    run(app)
    leaves = [box.value for box in app.selectbox if box.label == "Branch (by its leaf)"]
    assert any(value.startswith("m194 · ") for value in leaves)  # the migration case: m194 has a child
    assert not any("not in the session any more" in value for value in leaves)
