"""The Tree page on a long branched session: runs drawn collapsed and opened on demand, and the
active path shown a page at a time instead of whole."""
import json

import pytest
from streamlit.testing.v1 import AppTest

from memorylab import Session, Store, import_session
from memorylab.io import EXPORT_FORMAT, EXPORT_VERSION
from tests.contract.test_tree_scale import forking_conversation
from tests.helpers import ROOT

REF = ("default", "default", "long")


@pytest.fixture
def long_lab_db(sample_lab_db):
    with Store(sample_lab_db) as store:
        import_session(store, {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "session": {"id": "long"},
                               "messages": forking_conversation(2_000)})
    return sample_lab_db


def tree_page():
    app = AppTest.from_file(str(ROOT / "app_pages" / "tree.py"), default_timeout=60)
    app.session_state["session_ref"] = REF
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def drawn_points(app):
    spec = json.loads(app.get("plotly_chart")[0].proto.spec)
    return [c for trace in spec["data"] if "customdata" in trace for c in trace["customdata"]]


def test_a_long_session_draws_collapsed_runs_and_opens_one(long_lab_db):
    app = tree_page()
    points = drawn_points(app)
    assert len(points) < 100  # 2,000 messages, 20 forks: runs, branch points, side leaves
    assert [m.value for m in app.metric][:2] == ["2,000", "21"]
    opener = app.multiselect(key="tree_open_runs")
    run = opener.options[-1]
    opener.select(run).run()
    assert not app.exception
    opened = drawn_points(app)
    count = int(run.split("(")[1].split(" ")[0])
    assert len(opened) == len(points) + count - 1
    opener = app.multiselect(key="tree_open_runs")
    opener.unselect(opener.value[0]).run()
    assert len(drawn_points(app)) == len(points)


def test_the_active_path_is_shown_newest_first_a_page_at_a_time(long_lab_db):
    app = tree_page()
    with Store(long_lab_db) as store:
        expected = [m["id"] for m in Session.open(store, "long").get_history()]
    assert list(app.dataframe[0].value["id"]) == expected[-50:]
    [b for b in app.button if b.label == "Show 50 earlier"][0].click().run()
    assert list(app.dataframe[0].value["id"]) == expected[-100:]
