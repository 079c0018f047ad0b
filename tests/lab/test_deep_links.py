"""Links into the lab: the view (session, branch, experiment, tab, trial) lives in the URL's query
parameters, so a link opened in a fresh tab (here: a fresh AppTest) shows what the link names, and a
link to something the database lacks says so and falls back."""
import pytest
import yaml
from streamlit.testing.v1 import AppTest

from memorylab import Session, Store
from memorylab.experiments import Experiments
from tests.helpers import ROOT

TRIP = {"tenant": "default", "agent": "travel-planner", "session": "trip-planning-branches"}
SAMPLE_SPEC = ROOT / "sample_data" / "experiments" / "sample.yaml"


@pytest.fixture
def lab_db(sample_lab_db):
    return sample_lab_db


def open_link(page, **params):
    """A fresh browser tab opening ``/<page>?<params>``: the app's navigation runs that page."""
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    app.query_params.update(params)
    if page:
        app.switch_page(f"app_pages/{page}.py")
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def oldest_leaf(lab_db):
    with Store(lab_db) as store:
        return Session.open(store, TRIP["session"], agent_id=TRIP["agent"]).get_leaves()[-1]["id"]


def test_a_link_to_a_branch_opens_that_session_and_branch(lab_db):
    leaf = oldest_leaf(lab_db)
    app = open_link("tree", **TRIP, leaf=leaf)
    assert app.session_state["session_ref"] == tuple(TRIP.values())
    branch = next(box for box in app.selectbox if box.label.startswith("Active branch"))
    assert branch.value.startswith(f"{leaf} · ")
    assert app.query_params == TRIP | {"leaf": leaf}
    assert not app.warning


def test_what_the_page_shows_is_written_into_the_url(lab_db):
    app = open_link("tree")
    assert app.query_params == {"tenant": "default", "agent": "support-bot", "session": "support-order-4471"}
    picker = app.sidebar.selectbox[0]
    picker.select_index(next(i for i, option in enumerate(picker.options) if "trip-planning" in option)).run()
    branch = next(box for box in app.selectbox if box.label.startswith("Active branch"))
    branch.select_index(len(branch.options) - 1).run()
    assert app.query_params == TRIP | {"leaf": app.session_state["leaf_id"]}


@pytest.mark.parametrize("page", ["audit", "search", "experiments"])
def test_a_page_that_stops_early_still_writes_its_view_into_the_url(lab_db, page):
    app = open_link(page)  # the samples: no compaction to audit, no search typed, no experiment yet
    assert app.query_params == {"tenant": "default", "agent": "support-bot", "session": "support-order-4471"}


def test_a_link_changed_in_the_address_bar_is_followed_and_one_the_tab_wrote_is_not(lab_db):
    leaf = oldest_leaf(lab_db)
    app = open_link("chat")
    app.query_params.update(TRIP | {"leaf": leaf})  # back, forward, or an edited address
    app.run()
    assert app.session_state["session_ref"] == tuple(TRIP.values()) and app.session_state["leaf_id"] == leaf
    app.sidebar.selectbox[0].select_index(0).run()  # the sidebar's choice wins over the URL it then rewrites
    assert app.session_state["session_ref"] != tuple(TRIP.values())
    assert app.query_params["session"] == app.session_state["session_ref"][2]


def test_a_link_to_a_session_or_branch_that_is_not_there_says_so_and_falls_back(lab_db):
    app = open_link("chat", **TRIP | {"session": "deleted-long-ago"})
    assert "`deleted-long-ago`" in app.warning[0].value and "not in" in app.warning[0].value
    assert app.session_state["session_ref"] == ("default", "support-bot", "support-order-4471")
    assert app.query_params["session"] == "support-order-4471"
    app = open_link("tree", **TRIP, leaf="m999")
    assert "`m999`" in app.warning[0].value and "newest branch" in app.warning[0].value
    assert app.session_state["session_ref"] == tuple(TRIP.values()) and app.session_state["leaf_id"] is None
    assert "leaf" not in app.query_params


@pytest.fixture
def two_trials(lab_db):
    spec = yaml.safe_load(SAMPLE_SPEC.read_text(encoding="utf-8"))
    spec["arms"] = [arm for arm in spec["arms"] if arm["strategy"] in ("none", "truncate")]
    spec["cases"] = spec["cases"][:1]
    with Store(lab_db) as store:
        Experiments(store).run(spec)
        Experiments(store).run(spec)
    return spec["name"]


def test_a_link_to_an_experiments_trial_opens_it_on_its_tab(two_trials):
    app = open_link("experiments", tenant="default", experiment=two_trials, tab="Results", trial="1")
    assert app.session_state["exp_choice"] == two_trials
    assert app.session_state["exp_tab"] == "Results"
    assert next(box for box in app.selectbox if box.label == "Trial").value == 1
    assert app.query_params["trial"] == "1" and app.query_params["experiment"] == two_trials
    app = open_link("experiments", experiment=two_trials, tab="YAML")
    assert app.session_state["exp_tab"] == "YAML" and "trial" not in app.query_params


def test_a_link_to_an_experiment_or_trial_that_is_not_there_says_so(two_trials):
    app = open_link("experiments", experiment="gone")
    assert "“gone”" in app.warning[0].value
    app = open_link("experiments", experiment=two_trials, trial="7")
    assert "trial 7" in app.warning[0].value and "the newest is shown" in app.warning[0].value
    assert next(box for box in app.selectbox if box.label == "Trial").value == 2


def test_a_link_to_a_compaction_opens_its_audit_instead_of_the_worst(lab_db):
    with Store(lab_db) as store:
        for ref in (("default", "support-bot", "support-order-4471"), tuple(TRIP.values())):
            session = Session.open(store, ref[2], tenant_id=ref[0], agent_id=ref[1])
            history = session.get_history()
            session.add_compaction("Nothing of note.", history[0]["id"], history[3]["id"])
    support = {"tenant": "default", "agent": "support-bot", "session": "support-order-4471"}
    shown = open_link("audit", **support)
    assert not any("Session `support-order-4471`, overlay 1" in m.value for m in shown.markdown)
    app = open_link("audit", **support, overlay="1")
    assert any("Session `support-order-4471`, overlay 1" in m.value for m in app.markdown)
    assert app.query_params["overlay"] == "1"
    app = open_link("audit", **TRIP, overlay="9")
    assert "overlay 9" in app.warning[0].value
